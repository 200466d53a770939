"""The commands that read and report: `get`, `describe`, `logs` and `timeline` (a running
agent's HTTP API, or saved JSON) and `analyze` (dumps, or a cluster).

The CLI builds their parsers and imports this module only when one of them runs: its API
client, reports and analysis would otherwise stay in the memory of `nodelet run`, which never
uses them (issue 26).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from typing import Any

from nodelet.adapters import api_client
from nodelet.model.core import crilogs
from nodelet.model.reports import analysis, presenting, timeline
from nodelet.services.analysis import dumpfiles, liveanalysis
from nodelet.services.serving import logs


def _client(args: argparse.Namespace) -> api_client.ApiClient:
    token = args.token_file.read_text().strip() if args.token_file else None
    return api_client.ApiClient(args.server, token=token)


def cmd_get(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.resource == "manifests":
        data: Any = client.manifests()
        text = presenting.manifests_table(data) if args.output == "table" else None
    elif args.resource == "events":
        data = client.events()
        text = presenting.events_table(data, datetime.now(UTC)) if args.output == "table" \
            else None
    else:
        data = client.pods()
        text = presenting.pods_table(data, datetime.now(UTC)) if args.output == "table" else None
    print(text if text is not None else json.dumps(data, indent=2))
    return 0


def _pod_and_events(args: argparse.Namespace) -> tuple[Any, Any] | None:
    """The pod named on the command line and its events (precise times), or None."""
    client = _client(args)
    pod = presenting.find_pod(client.pods(precise=True), args.name, args.namespace)
    if pod is None:
        print(f'Error: pod "{args.name}" not found', file=sys.stderr)
        return None
    meta = pod["metadata"]
    return pod, client.events(pod=meta["name"], namespace=meta.get("namespace"), precise=True)


def cmd_describe(args: argparse.Namespace) -> int:
    found = _pod_and_events(args)
    if found is None:
        return 1
    print(presenting.describe_pod(*found, datetime.now(UTC)))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    try:
        pod = logs.find_pod(_client(args).pods(), args.name, args.namespace)
        target = logs.locate(pod, container=args.container, previous=args.previous,
                             data_dir=args.data_dir)
        logs.write_logs(target, sys.stdout.buffer, tail=args.tail if args.tail >= 0 else None,
                        timestamps=args.timestamps, follow=args.follow)
    except crilogs.LogsError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep the interpreter's final
        # flush of stdout from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_timeline(args: argparse.Namespace) -> int:
    found = _saved_pod(args) if args.file is not None else _pod_and_events(args)
    if found is None:
        return 1
    print(timeline.render_text(timeline.build(*found, datetime.now(UTC))), end="")
    return 0


def _saved_pod(args: argparse.Namespace) -> tuple[Any, Any] | None:
    """The pod named on the command line from `--file` (no events), or None."""
    try:
        saved = timeline.pods_from_text(args.file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"Error: cannot read {args.file}: {exc}", file=sys.stderr)
        return None
    pod = presenting.find_pod(saved, args.name, args.namespace)
    if pod is None:
        print(f'Error: pod "{args.name}" not found in {args.file}', file=sys.stderr)
        return None
    return pod, None


def cmd_analyze(args: argparse.Namespace) -> int:
    live = args.kubeconfig is not None
    if live and (args.inputs or args.events):
        raise analysis.AnalysisError("give either dump files or --kubeconfig, not both")
    if not live and (args.watch or args.metrics_address or args.all_namespaces
                     or args.namespace or args.selector):
        raise analysis.AnalysisError("--watch, --metrics-address, -n, -A and -l need "
                                     "--kubeconfig")
    if args.metrics_address and not args.watch:
        raise analysis.AnalysisError("--metrics-address needs --watch")
    if live:
        return liveanalysis.run(liveanalysis.Request(
            kubeconfig=args.kubeconfig,
            namespace=None if args.all_namespaces else (args.namespace or "default"),
            selector=args.selector, output=args.output, output_file=args.output_file,
            watch=args.watch, metrics_address=args.metrics_address,
            page_size=max(0, args.chunk_size)))
    if not args.inputs and not args.events:
        raise analysis.AnalysisError("no input: give dump files or directories, - for "
                                     "stdin, or --kubeconfig")
    return dumpfiles.run(dumpfiles.Request(args.inputs, args.events, args.output,
                                           args.output_file))


HANDLERS = {"get": cmd_get, "describe": cmd_describe, "logs": cmd_logs,
            "timeline": cmd_timeline, "analyze": cmd_analyze}
# Printed as `Error: ...` (exit status 2) by the CLI.
ERRORS = (api_client.ApiClientError, analysis.AnalysisError)
