"""Records the ldpref checkout this package is installed from, so that the
installed package finds that checkout's build/libldpref.so (ldpref/_lib.py).
Everything else is in pyproject.toml."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class build_py_with_checkout(build_py):
    def run(self):
        super().run()
        root = Path(__file__).resolve().parents[2]
        if (root / "client" / "lib" / "ldpref.h").is_file():
            target = Path(self.build_lib, "ldpref", "_checkout.py")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(
                '"""Written at install time: the ldpref checkout installed from."""\n'
                f"CHECKOUT = {str(root)!r}\n"
            )


setup(cmdclass={"build_py": build_py_with_checkout})
