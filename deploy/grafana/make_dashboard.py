import json

DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'model=~"$model", node=~"$node", instance=~"$instance"'
RI = "$__rate_interval"
panels = []
pid = [0]
y = [0]

def nid():
    pid[0] += 1
    return pid[0]

def row(title):
    panels.append({"type": "row", "title": title, "id": nid(), "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y[0]}, "panels": []})
    y[0] += 1

def target(expr, legend, ref, **kw):
    t = {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}
    t.update(kw)
    return t

def ts(title, desc, targets, unit, x, w, h=8, stack=False, bars=False, extra=None):
    p = {
        "type": "timeseries", "title": title, "description": desc, "id": nid(), "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": x, "y": y[0]},
        "targets": [target(e, l, chr(ord("A") + i)) for i, (e, l) in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit, "custom": {
            "drawStyle": "bars" if bars else "line", "lineWidth": 1,
            "fillOpacity": 60 if (stack or bars) else 10, "showPoints": "never",
            "stacking": {"mode": "normal" if stack else "none", "group": "A"}}},
            "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom",
                               "calcs": ["lastNotNull", "max"]},
                    "tooltip": {"mode": "multi", "sort": "desc"}},
    }
    if extra:
        p.update(extra)
    panels.append(p)

def stat(title, desc, expr, unit, x, w=6, h=4, thresholds=None):
    panels.append({
        "type": "stat", "title": title, "description": desc, "id": nid(), "datasource": DS,
        "gridPos": {"h": h, "w": w, "x": x, "y": y[0]},
        "targets": [target(expr, "", "A", instant=True, range=False)],
        "fieldConfig": {"defaults": {"unit": unit, "thresholds": thresholds or {
            "mode": "absolute", "steps": [{"color": "green", "value": None}]}}, "overrides": []},
        "options": {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                    "colorMode": "value", "graphMode": "area", "textMode": "auto"},
    })

def q(quantile, metric):
    return (f"histogram_quantile({quantile}, sum by (model, le) "
            f"(rate({metric}_bucket{{{SEL}}}[{RI}])))")

# Overview
row("Overview")
stat("Requests / s", "All models and status codes.",
     f"sum(rate(packrat_requests_total{{{SEL}}}[{RI}]))", "reqps", 0)
stat("Errors", "Share of requests answered with a status >= 400.",
     f'sum(rate(packrat_requests_total{{{SEL}, code=~"[45].."}}[{RI}])) / '
     f"sum(rate(packrat_requests_total{{{SEL}}}[{RI}]))", "percentunit", 6,
     thresholds={"mode": "absolute", "steps": [{"color": "green", "value": None},
                                               {"color": "orange", "value": 0.01},
                                               {"color": "red", "value": 0.05}]})
stat("p99 request latency", "Across the selected models.",
     f"histogram_quantile(0.99, sum by (le) (rate(packrat_request_duration_seconds_bucket{{{SEL}}}[{RI}])))",
     "s", 12)
stat("Ready instances", "Runtime instances in state ready.",
     f'sum(packrat_instances{{{SEL}, state="ready"}})', "short", 18)
y[0] += 4

row("Latency")
ts("Request latency percentiles",
   "End-to-end per request: receipt to response (histogram_quantile over packrat_request_duration_seconds).",
   [(q(0.5, "packrat_request_duration_seconds"), "{{model}} p50"),
    (q(0.9, "packrat_request_duration_seconds"), "{{model}} p90"),
    (q(0.99, "packrat_request_duration_seconds"), "{{model}} p99")], "s", 0, 12)
ts("Queue and compute time (p50, p99)",
   "Queue: enqueued until its batch was dispatched. Compute: one batch on the instances.",
   [(q(0.5, "packrat_queue_duration_seconds"), "{{model}} queue p50"),
    (q(0.99, "packrat_queue_duration_seconds"), "{{model}} queue p99"),
    (q(0.5, "packrat_compute_duration_seconds"), "{{model}} compute p50"),
    (q(0.99, "packrat_compute_duration_seconds"), "{{model}} compute p99")], "s", 12, 12)
y[0] += 8

row("Throughput")
ts("Requests / s by model and code", "rate(packrat_requests_total) by model and HTTP status.",
   [(f"sum by (model, code) (rate(packrat_requests_total{{{SEL}}}[{RI}]))", "{{model}} {{code}}")],
   "reqps", 0, 12, stack=True)
ts("In flight and queued", "Requests accepted and not answered; rows waiting in the batcher.",
   [(f"sum by (model) (packrat_inflight_requests{{{SEL}}})", "{{model}} in-flight requests"),
    (f"sum by (model) (packrat_queue_rows{{{SEL}}})", "{{model}} queued rows")], "short", 12, 12)
y[0] += 8

row("Batching")
ts("Executed batch size",
   "Rows per executed batch: mean, and p50/p99 from packrat_batch_size_rows.",
   [(f"sum by (model) (rate(packrat_batch_size_rows_sum{{{SEL}}}[{RI}])) / "
     f"sum by (model) (rate(packrat_batch_size_rows_count{{{SEL}}}[{RI}]))", "{{model}} mean"),
    (q(0.5, "packrat_batch_size_rows"), "{{model}} p50"),
    (q(0.99, "packrat_batch_size_rows"), "{{model}} p99")], "short", 0, 8)
panels.append({
    "type": "heatmap", "title": "Batch size distribution",
    "description": "Executed batches per size bucket (packrat_batch_size_rows).", "id": nid(),
    "datasource": DS, "gridPos": {"h": 8, "w": 8, "x": 8, "y": y[0]},
    "targets": [target(f"sum by (le) (increase(packrat_batch_size_rows_bucket{{{SEL}}}[{RI}]))",
                       "{{le}}", "A", format="heatmap")],
    "options": {"calculate": False, "yAxis": {"unit": "short"},
                "cellGap": 1, "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64}},
    "fieldConfig": {"defaults": {}, "overrides": []},
})
ts("Target batch B and estimate",
   "B the instances are configured for, and the batch-size estimator's value it follows.",
   [(f"max by (model) (packrat_target_batch_rows{{{SEL}}})", "{{model}} B"),
    (f"max by (model) (packrat_estimated_batch_rows{{{SEL}}})", "{{model}} estimate")],
   "short", 16, 8)
y[0] += 8

row("Instances and reconfiguration")
ts("Instances by ⟨threads, batch⟩ and state", "packrat_instances.",
   [(f"sum by (model, threads, batch, state) (packrat_instances{{{SEL}}})",
     "{{model}} ⟨{{threads}},{{batch}}⟩ {{state}}")], "short", 0, 8, stack=True)
ts("Reconfigurations and runtime restarts", "Per rate interval.",
   [(f"sum by (model) (increase(packrat_reconfigurations_total{{{SEL}}}[{RI}]))",
     "{{model}} reconfigurations"),
    (f"sum by (model) (increase(packrat_runtime_restarts_total{{{SEL}}}[{RI}]))",
     "{{model}} runtime restarts")], "short", 8, 8, bars=True)
ts("Predicted vs measured batch latency",
   "The optimizer's prediction for the current plan next to the measured batch latency "
   "(averaged over the agents).",
   [(f"avg by (model) (packrat_predicted_batch_latency_seconds{{{SEL}}})", "{{model}} predicted"),
    (f"avg by (model) (packrat_measured_batch_latency_seconds{{{SEL}}})", "{{model}} measured")],
   "s", 16, 8)
y[0] += 8
ts("Reality / profile", "measured / predicted batch latency; 1 means the profile holds.",
   [(f"avg by (model) (packrat_measured_batch_latency_seconds{{{SEL}}}) / "
     f"avg by (model) (packrat_predicted_batch_latency_seconds{{{SEL}}})", "{{model}}")],
   "none", 0, 24, h=6)
y[0] += 6

row("Node partition")
ts("CPUs per model",
   "packrat_model_cpus: each model's share of the node's CPUs (node partition, model "
   "repository); the node controller moves them as the load moves.",
   [(f"sum by (model) (packrat_model_cpus{{{SEL}}})", "{{model}}")], "short", 0, 12, stack=True)
ts("Partition moves and arrival rate",
   "packrat_partition_moves_total by reason (per rate interval), beside each model's requests/s "
   "that drive them.",
   [('sum by (reason) (increase(packrat_partition_moves_total{node=~"$node", instance=~"$instance"}[$__rate_interval]))',
     "moves: {{reason}}"),
    (f"sum by (model) (rate(packrat_requests_total{{{SEL}}}[{RI}]))", "{{model}} req/s")],
   "short", 12, 12)
y[0] += 8

row("Layered batching and generation")
ts("Top-up queries by outcome",
   "Layered batching: queries of runtimes at stage boundaries, by outcome "
   "(joined, queue_empty, refused over the budget), and rows that joined running batches.",
   [(f"sum by (model, outcome) (rate(packrat_topup_queries_total{{{SEL}}}[{RI}]))",
     "{{model}} {{outcome}}"),
    (f"sum by (model) (rate(packrat_topup_rows_total{{{SEL}}}[{RI}]))", "{{model}} rows joined")],
   "short", 0, 8)
ts("Predicted completion of top-ups (p50, p99) and N_opt",
   "Layered batching: the admission's predicted completion of each admitted top-up; the "
   "largest batch the latency budget allows.",
   [(q(0.5, "packrat_topup_predicted_latency_seconds"), "{{model}} predicted p50"),
    (q(0.99, "packrat_topup_predicted_latency_seconds"), "{{model}} predicted p99")],
   "s", 8, 8)
ts("Generated tokens / s and time to first token",
   "Generative models: tokens per second, and p50/p99 from request arrival to the first token.",
   [(f"sum by (model) (rate(packrat_generated_tokens_total{{{SEL}}}[{RI}]))", "{{model}} tokens/s"),
    (q(0.5, "packrat_time_to_first_token_seconds"), "{{model}} first token p50 (s)"),
    (q(0.99, "packrat_time_to_first_token_seconds"), "{{model}} first token p99 (s)")],
   "short", 16, 8)
y[0] += 8

def agents(expr):
    # process_* series of Packrat agents only (targets that also export packrat_* series).
    return f"{expr} and on (instance, job) count by (instance, job) (packrat_inflight_requests)"

row("Process")
ts("Resident memory", "process_resident_memory_bytes per agent.",
   [(agents('process_resident_memory_bytes{node=~"$node", instance=~"$instance"}'), "{{instance}}")],
   "bytes", 0, 8)
ts("CPU", "Agent process CPU (runtimes are separate processes).",
   [(agents('rate(process_cpu_seconds_total{node=~"$node", instance=~"$instance"}[$__rate_interval])'),
     "{{instance}}")], "percentunit", 8, 8)
ts("Open file descriptors", "process_open_fds against process_max_fds.",
   [(agents('process_open_fds{node=~"$node", instance=~"$instance"}'), "{{instance}} open"),
    (agents('process_max_fds{node=~"$node", instance=~"$instance"}'), "{{instance}} max")],
   "short", 16, 8)
y[0] += 8
ts("Runtime CPU", "CPUs in use by each model's runtime processes (serving, draining, parked): "
   "packrat_runtime_cpu_seconds_total, one series per process, summed by model.",
   [(f'sum by (model) (rate(packrat_runtime_cpu_seconds_total{{{SEL}}}[{RI}]))', "{{model}}")],
   "short", 0, 12, stack=True)
ts("Runtime memory", "Resident memory of each model's runtime processes, summed by model (each "
   "runtime holds one copy of its model).",
   [(f'sum by (model) (packrat_runtime_resident_memory_bytes{{{SEL}}})', "{{model}}")],
   "bytes", 12, 12, stack=True)
y[0] += 8

def var(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DS,
            "query": {"query": query, "refId": name}, "definition": query, "refresh": 2,
            "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "sort": 1}

dashboard = {
    "uid": "packrat-agent",
    "title": "Packrat",
    "description": "Packrat node agents: latency, throughput, batching, instances, "
                   "reconfiguration and the optimizer's predictions (docs/operations.md).",
    "tags": ["packrat", "inference"],
    "timezone": "browser",
    "schemaVersion": 38,
    "version": 1,
    "editable": True,
    "graphTooltip": 1,
    "refresh": "30s",
    "time": {"from": "now-1h", "to": "now"},
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0, "refresh": 1},
        # The Kubernetes node: the label the chart's ServiceMonitor adds from the pod's node.
        # Series scraped without it match "All" (".*" matches the empty value).
        var("node", "Node", "label_values(packrat_inflight_requests, node)"),
        var("instance", "Agent", 'label_values(packrat_inflight_requests{node=~"$node"}, instance)'),
        var("model", "Model", 'label_values(packrat_inflight_requests{node=~"$node", instance=~"$instance"}, model)'),
    ]},
    "annotations": {"list": [{
        "name": "Reconfigurations", "datasource": DS, "enable": True, "iconColor": "purple",
        "expr": f"sum by (model) (changes(packrat_reconfigurations_total{{{SEL}}}[1m])) > 0",
        "titleFormat": "reconfiguration", "textFormat": "{{model}}", "step": "60s"}]},
    "panels": panels,
}
print(json.dumps(dashboard, indent=2, ensure_ascii=False))
