"""The report: context, plots and Jinja2 templates."""
