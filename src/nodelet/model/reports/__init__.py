"""What the tools show (pure): `analyze` (analysis*), pod timelines, kubectl-like tables and
descriptions (`presenting`), live progress lines, histograms and SVG charts. Read `core`
values or v1 JSON; never parse manifests."""
