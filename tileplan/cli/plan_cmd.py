"""`tileplan plan` and `tileplan eval`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tileplan.cli.app import (
    ARCH_HELP,
    BUDGET_HELP,
    DEFAULT_BUDGET,
    JOBS_HELP,
    KV_HELP,
    MAX_GROUP_HELP,
    MODEL_HELP,
    NO_PRUNE_HELP,
    OBJECTIVE_HELP,
    PSUM_HELP,
    SEED_HELP,
    SEQ_HELP,
    SET_HELP,
    STRATEGY_HELP,
    _guard,
    _progress,
    app,
    check_names,
    machine_sets,
    out,
)
from tileplan.errors import TileplanError

if TYPE_CHECKING:
    from tileplan.fusion.plan import FusionPlan
    from tileplan.mapping import Mapping
    from tileplan.plan import LayerCost
    from tileplan.workload.network import Network


@app.command()
def plan(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    psum_bytes: int | None = typer.Option(None, "--psum-bytes", min=1, max=8, help=PSUM_HELP),
    objective: str = typer.Option("latency", "--objective", "-o", help=OBJECTIVE_HELP),
    strategy: str = typer.Option("exhaustive", "--strategy", "-s", help=STRATEGY_HELP),
    dram_model: str = typer.Option("burst", "--dram-model",
                                   help="DRAM time the search minimises: burst | volume (plans are "
                                        "always costed with bursts)."),
    fix_partition: str | None = typer.Option(None, "--fix-partition", help="tso: only KS | KS&OFM | OFM."),
    fix_schedule: str | None = typer.Option(None, "--fix-schedule", help="tso: only IS | OS | WS."),
    batch: int = typer.Option(1, "--batch", "-b", min=1, max=1024, help="Batch size (1 to 1024)."),
    seq: int | None = typer.Option(None, "--seq", help=SEQ_HELP),
    kv: int | None = typer.Option(None, "--kv", help=KV_HELP),
    budget: int | None = typer.Option(None, "--budget", min=1, max=2**21, help=BUDGET_HELP),
    seed: int | None = typer.Option(None, "--seed", min=0, help=SEED_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help="Search every layer, even identical ones."),
    skip_unsupported: bool = typer.Option(False, "--skip-unsupported",
                                          help="Pass unsupported ONNX operators through with a warning."),
    all_layers: bool = typer.Option(False, "--all", help="Show layers that reuse an identical layer's plan."),
    jobs: int | None = typer.Option(None, "--jobs", "-j", min=1, help=JOBS_HELP),
    json_path: Path | None = typer.Option(None, "--json", help="Write the plan as JSON."),
    csv_path: Path | None = typer.Option(None, "--csv", help="Write one CSV row per layer."),
    plots_dir: Path | None = typer.Option(None, "--plots", help="Write the plan's figures (roofline, traffic, "
                                          "time, layer graph) as PNG and SVG into this folder."),
    fuse: bool = typer.Option(False, "--fuse", help="Also fuse groups of layers: chains, residual blocks, "
                              "attention and MLP blocks (the maps between them stay on chip)."),
    max_group: int | None = typer.Option(None, "--max-group", help=MAX_GROUP_HELP + " Default 4; 2 "
                                         "with --strategy hwff, as HW-Flow-Fusion's Table 5."),
    no_prune: list[str] | None = typer.Option(None, "--no-prune", help=NO_PRUNE_HELP),
    max_parallel: int | None = typer.Option(None, "--max-parallel",
                                            help="marvel*: most dimensions that fan out over the PEs (default 3)."),
    min_utilization: float | None = typer.Option(None, "--min-utilization",
                                                 help="marvel*: least fraction of the PEs a step uses (default 0.1)."),
    emit_timeloop: Path | None = typer.Option(None, "--emit-timeloop",
                                              help="Write each layer's problem and chosen mapping as Timeloop v0.4 "
                                                   "files into this folder (--arch a Timeloop arch.yaml; a "
                                                   "multi-level strategy: marvel, marvel-joint)."),
    emit_zigzag: Path | None = typer.Option(None, "--emit-zigzag",
                                            help="Write the plan as ZigZag inputs (workload.yaml, hardware.yaml, "
                                                 "mapping.yaml) into this folder."),
) -> None:
    """Find the best mapping of every layer of MODEL and print a per-layer table with totals
    (with --fuse: the best cut into fused groups and single layers)."""
    check_names((strategy,), objective, sampling=(("--budget", budget), ("--seed", seed)))
    from tileplan import api
    from tileplan.cli.guards import check_flags, check_outputs
    from tileplan.interop.tlyaml import timeloop_keys
    from tileplan.report.files import check_output_folder, make_output_folder, write_text_atomic
    from tileplan.report.tables import plan_csv, plan_summary, plan_table

    draws = DEFAULT_BUDGET if budget is None else budget  # candidates of a sampling strategy
    draw_seed = 0 if seed is None else seed

    def work() -> None:
        api.check_options(strategy=strategy, objective=objective, budget=draws, seed=draw_seed, batch=batch, fuse=fuse)
        check_flags([strategy], fuse=fuse, fix_partition=fix_partition, fix_schedule=fix_schedule,
                    max_group=max_group, marvel_flags=[("--no-prune", no_prune), ("--max-parallel", max_parallel),
                                                       ("--min-utilization", min_utilization)],)
        group_limit = max_group if max_group is not None else (2 if strategy == "hwff" else 4)
        # fail before a long search, not after it
        check_outputs([("--json", json_path), ("--csv", csv_path)], model=model, arch=arch)
        if plots_dir is not None:
            check_output_folder(plots_dir)
        if emit_zigzag is not None:
            check_output_folder(emit_zigzag)
        if emit_timeloop is not None:
            check_output_folder(emit_timeloop)
            if fuse or "architecture" not in timeloop_keys(arch):
                raise TileplanError("--emit-timeloop writes a Timeloop mapping for the Timeloop architecture it "
                                    "targets: pass --arch ARCH.yaml (a Timeloop v0.4 file) and no --fuse")
            if not api.multi_level_strategy(strategy):
                raise TileplanError(f"--emit-timeloop writes multi-level mappings; strategy {strategy!r} makes "
                                    f"two-level ones: plan with --strategy marvel or marvel-joint")
        options = api.strategy_options(fix_partition=fix_partition, fix_schedule=fix_schedule, pruning=no_prune or (),
                                       max_parallel=max_parallel, min_utilization=min_utilization)
        machine = api.load_arch(arch, machine_sets(sets, psum_bytes))
        network = api.load_network(model, batch=batch, skip_unsupported=skip_unsupported, seq=seq, kv=kv)
        with _progress() as bar:
            task = bar.add_task("planning", total=None, label="")

            def tick(done: int, total: int, label: str) -> None:
                bar.update(task, completed=done, total=total, label=label)

            if fuse:
                fused = api.plan_fused(network, machine, strategy=strategy, objective=objective, budget=draws,
                                       seed=draw_seed, cache=not no_cache, jobs=jobs, max_group=group_limit,
                                       progress=tick)
            else:
                result = api.plan(network, machine, strategy=strategy, objective=objective, budget=draws,
                                  seed=draw_seed, cache=not no_cache, jobs=jobs, progress=tick, dram_model=dram_model,
                                  options=options)
        if fuse:
            _print_fused(fused, network, json_path, csv_path)
            result = fused.base
        else:
            out.print(plan_table(result, network, show_cached=all_layers))
            out.print(plan_summary(result), highlight=False)
            if json_path:
                write_text_atomic(json_path, result.to_json())
            if csv_path:
                write_text_atomic(csv_path, plan_csv(result))
            if emit_timeloop is not None:
                written = api.write_timeloop(result, network, arch, emit_timeloop)
                out.print(f"wrote {len(written)} Timeloop files to {emit_timeloop}", highlight=False)
            if emit_zigzag is not None:
                written = api.write_zigzag(result, network, machine, emit_zigzag)
                out.print(f"wrote {len(written)} ZigZag files to {emit_zigzag}", highlight=False)
        if plots_dir is not None:
            from tileplan.report.plan_plots import plan_figures, save_plan_figures

            paths = save_plan_figures(plan_figures(result, machine, network), make_output_folder(plots_dir))
            out.print(f"wrote {len(paths) // 2} figures (PNG and SVG) to {plots_dir}", highlight=False)

    _guard(work)


def _print_fused(fused: FusionPlan, network: Network, json_path: Path | None, csv_path: Path | None) -> None:
    from tileplan.report.files import write_text_atomic
    from tileplan.report.fusion_tables import fusion_table
    from tileplan.report.tables import plan_csv

    base = fused.base
    out.print(fusion_table(fused, network))
    saving = 1 - fused.dram_bytes / base.dram_bytes if base.dram_bytes else 0.0
    out.print(f"fused: latency {fused.latency_cycles:,.0f} cycles, DRAM {fused.dram_bytes / 1e6:.3f} MB, energy "
              f"{fused.energy_pj / 1e6:.3f} uJ; unfused: latency {base.latency_cycles:,.0f} cycles, DRAM "
              f"{base.dram_bytes / 1e6:.3f} MB, energy {base.energy_pj / 1e6:.3f} uJ; DRAM saving {saving:.1%}; "
              f"{fused.meta['candidates']} candidate groups, {fused.meta['searched']} searched "
              f"(* marks reuse of an identical segment's plan)")
    if "space_size" in fused.meta:
        out.print(f"fused search: space {fused.meta['space_size']:.3g} mappings, {fused.meta['screened']:,} "
                  f"(tile pair, choice) candidates screened, {fused.meta['evaluated']:,} fully costed, "
                  f"{fused.meta['search_seconds']:.2f} s (per group: --json, meta.group_search)")
    if json_path:
        write_text_atomic(json_path, fused.to_json())
    if csv_path:
        write_text_atomic(csv_path, plan_csv(base))


@app.command("eval")
def eval_cmd(
    model: str = typer.Argument(..., help=MODEL_HELP),
    arch: str = typer.Option("nmp", "--arch", "-a", help=ARCH_HELP),
    sets: list[str] | None = typer.Option(None, "--set", help=SET_HELP),
    psum_bytes: int | None = typer.Option(None, "--psum-bytes", min=1, max=8, help=PSUM_HELP),
    layer: str | None = typer.Option(None, "--layer", "-l", help="Layer name (see `tileplan zoo show MODEL`; "
                                     "may be left out when MODEL has one layer)."),
    mapping: Path = typer.Option(..., "--mapping", "-m", help="Mapping JSON (as written by `plan --json`) or a "
                                 "Timeloop v0.4 mapping (.yaml, with a Timeloop --arch)."),
    json_out: bool = typer.Option(False, "--json", help="Print the cost breakdown as JSON."),
) -> None:
    """Cost one given mapping of one layer (model mode), with a clear error if it is invalid."""

    from tileplan import api
    from tileplan.files import read_json_input
    from tileplan.interop.tlyaml import timeloop_keys
    from tileplan.mapping import Mapping

    def work() -> None:
        network = api.load_network(model)
        if layer is None and len(network.layers) != 1:
            raise TileplanError(f"{model} has {len(network.layers)} layers; name one with --layer "
                                f"(e.g. --layer {network.layers[0].name})")
        target = network[layer] if layer is not None else network.layers[0]
        if "mapping" in timeloop_keys(mapping):
            machine, m = api.timeloop_mapping(target, arch, mapping)
            machine = api.load_arch(machine, machine_sets(sets, psum_bytes))
            _print_cost(m, api.evaluate(target, machine, m), json_out)
            return
        machine = api.load_arch(arch, machine_sets(sets, psum_bytes))
        data = read_json_input(mapping, "mapping file (JSON)", f"mapping file {mapping} is", "a mapping")
        if isinstance(data, dict) and "layers" in data:  # a whole plan: take this layer's mapping
            layers = data["layers"]
            if not isinstance(layers, list) or not all(isinstance(lp, dict) and "name" in lp for lp in layers):
                raise TileplanError(f"plan file {mapping}: 'layers' must be a list of objects with a 'name' and "
                                    f"a 'mapping' (as `tileplan plan --json` writes)")
            match = [lp for lp in layers if lp["name"] == layer and lp.get("mapping")]
            if not match:
                raise TileplanError(f"plan file {mapping} has no mapping for layer {layer!r}")
            if not isinstance(match[0]["mapping"], dict):
                raise TileplanError(f"plan file {mapping}: the mapping of layer {layer!r} is not an object")
            m = Mapping.from_dict(match[0]["mapping"], dims=target.dims)
        else:
            m = Mapping.from_object(data, dims=target.dims)
        _print_cost(m, api.evaluate(target, machine, m), json_out)

    _guard(work)


def _print_cost(m: Mapping, cost: LayerCost, json_out: bool) -> None:
    from dataclasses import asdict

    from tileplan.report.tables import number

    if json_out:
        out.print_json(json.dumps(asdict(cost)))
        return
    out.print(str(m))
    for key, value in asdict(cost).items():
        out.print(f"{key:28s} {number(value) if isinstance(value, float | int) else value}", highlight=False)
    out.print(f"{'bound':28s} {cost.bound} (the largest of compute, NoC and DRAM time)", highlight=False)
