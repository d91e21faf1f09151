"""The report page: ``report.html`` of every run and sweep directory, written whenever its
report changes, and ``mode=report``, which rebuilds it (README.md, this folder's guide)."""

from conf.features import Feature

FEATURE = Feature(
    name="report",
    modes={"report": "features.report.command"},
    pages="features.report.page:write_page",
)
