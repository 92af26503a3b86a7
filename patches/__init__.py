# Patch definitions are data (the *.json files beside this one); this file only lets them ship as
# package data of `patcher` (see [tool.setuptools] in pyproject.toml).
