"""attnviz: the frame (attnviz/ui/frame.py) over the page files in app_pages/, for `streamlit run app.py` from the
repository. The installed package serves the same pages from attnviz/streamlit_app.py (`attnviz serve`).

The pages live in app_pages/, not pages/: with a folder named pages/, Streamlit 1.67 starts in its old
folder-based mode server-wide, and a first request for a page's URL then runs that page without this file.
"""

from attnviz.ui import frame

frame.main(frame.file_pages("app_pages"))
