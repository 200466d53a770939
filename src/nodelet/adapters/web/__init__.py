"""The read-only web UI (`/ui`): server-rendered pages, inline SVG charts, one small script.

`pages.Ui` renders HTML from the same v1 JSON the API serves; `svg` draws the timeline and the
histograms; `exposition` reads histograms and counters back from the `/metrics` text. No aiohttp
here: `http_server` routes requests to these functions.
"""
