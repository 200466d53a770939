"""The read-only web UI (`/ui`): server-rendered pages, inline SVG charts, one small script.

`pages.Ui` renders HTML from the agent's own typed values (pods with their statuses, events, and
the metrics as `model.reports.histograms` values); `svg` draws the timeline and, through
`model.reports.charts`, the histograms. No aiohttp here: `http_server` routes requests to these
functions.
"""
