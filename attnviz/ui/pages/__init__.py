"""One module per page, each with render(): the page's whole flow. app_pages/*.py only call render()."""
