"""Everything is configured in pyproject.toml; this file only mends editable installs.

setuptools leaves `data-files` out of editable wheels (pypa/setuptools#3399: its editable_wheel
asks the distribution for `has_data`, which does not exist), so `pip install -e .` would not
install the prebuilt JupyterLab extension into share/jupyter/labextensions. Here it does, as a
regular install would. tests/test_bundles.py checks that the extension is where JupyterLab looks.
"""
from setuptools import setup
from setuptools.command.editable_wheel import editable_wheel


class editable_wheel_with_data(editable_wheel):
    def _run_install(self, category: str):
        if category == "data" and self.distribution.has_data_files():
            self.run_command("install_data")
            return
        super()._run_install(category)


setup(cmdclass={"editable_wheel": editable_wheel_with_data})
