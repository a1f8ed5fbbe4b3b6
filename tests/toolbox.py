"""Tools for the tests, in a module of their own that imports nothing heavy: a tool worker imports the module a tool
is defined in, so these start in a fraction of a second. The hostile ones end, hang or flood their worker."""
import asyncio, ctypes, os, re, time


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first term
        b: the second term
    """
    await asyncio.sleep(0.001)
    return a + b


def explode(x: int) -> int:
    """Raise.

    Args:
        x: anything
    """
    raise RuntimeError("the tool broke")


def hang(x: int) -> int:
    """Never return in time.

    Args:
        x: anything
    """
    time.sleep(30)
    return x


def silent(x: int):
    """Return nothing.

    Args:
        x: anything
    """


def leave(x: int) -> int:
    """End the process that runs it, with exit status 0.

    Args:
        x: anything
    """
    os._exit(0)


def crash(x: int) -> int:
    """Crash the process that runs it (a segmentation fault).

    Args:
        x: anything
    """
    return ctypes.string_at(0)


def backtrack(x: int) -> str:
    """Hold the GIL for seconds in regex backtracking (C code that no thread can interrupt).

    Args:
        x: anything
    """
    return str(bool(re.match(r"(a+)+$", "a" * 25 + "b")))  # seconds of backtracking


def flood(x: int) -> str:
    """Return 2 MB of text.

    Args:
        x: anything
    """
    return "7" * 2_000_000


def whoami(x: int) -> int:
    """The id of the process that runs it, after a pause (so that no process takes two calls of a turn).

    Args:
        x: anything
    """
    time.sleep(0.5)
    return os.getpid()
