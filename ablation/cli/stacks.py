"""`ablation stacks ...` and `make-tiny-model`: the leg environments and the models they load."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ablation.cli.app import _builder, _stacks, main, one_line_errors
from ablation.errors import AblationError, one_line


@main.group()
def stacks():
    """List, show and build leg environments."""


@stacks.command("list")
@click.pass_context
@one_line_errors
def stacks_list(ctx):
    """One line per leg: engine, platform, and whether its venv is built."""
    sd, builder = _stacks(ctx), _builder(ctx)
    for leg in sd.legs():
        try:
            sf = sd.load(str(sd.root / f"{leg}.yaml"))  # by path: a refusal names the file
        except AblationError as exc:  # one bad file does not hide the other legs
            click.echo(f"warning: {exc}; not listed", err=True)
            continue
        s = sf.stack
        built = "built" if builder.existing(sf) else "not built"
        variants = f" variants: {', '.join(o.name for o in s.overrides)}" if s.overrides else ""
        click.echo(f"{leg:12} {s.engine}=={s.engine_version:10} {s.platform:5} python {s.python}  {built}{variants}")


@stacks.command("show")
@click.argument("leg")
@click.pass_context
@one_line_errors
def stacks_show(ctx, leg: str):
    """The stack file as parsed, and the built venv's manifest if there is one."""
    sf = _stacks(ctx).load(leg)
    click.echo(json.dumps({"file": str(sf.path), "sha256": sf.sha256, "stack": sf.stack.model_dump()}, indent=2))
    env = _builder(ctx).existing(sf)
    if env:
        man = {k: v for k, v in env.manifest.items() if k != "packages"}
        click.echo(json.dumps({"venv": str(env.path), "manifest": man}, indent=2))


@stacks.command("env")
@click.argument("leg")
@click.pass_context
@one_line_errors
def stacks_env(ctx, leg: str):
    """`export` lines for the environment the harness of LEG runs with (stack env, per-leg caches).

    For a measurement made by hand in the leg's venv, e.g. bench/fidelity_offline.py:
    `eval "$(ablation stacks env LEG)"` gives it the harness's environment exactly."""
    import shlex

    from ablation.envs.environment import leg_process_env, without_runner_python
    from ablation.spec import identifiers

    sd, builder = _stacks(ctx), _builder(ctx)
    sf = sd.load(leg)
    env = without_runner_python({**sf.stack.env, **leg_process_env(builder.path_for(sf.leg))})
    lines = []
    for name, value in env.items():  # names are POSIX names (checked at load and here); values quoted
        identifiers.check(identifiers.env_name, name, f"{sf.path}: field 'env'")
        lines.append(f"export {name}={shlex.quote(value)}")
    click.echo("\n".join(lines))


@stacks.command("build")
@click.argument("legs", nargs=-1, required=True)
@click.option("--variant", default=None, help="build a per-model override variant")
@click.option("--all-variants", is_flag=True, help="also build every override variant of the leg")
@click.option("--force", is_flag=True, help="rebuild even if the venv matches the stack")
@click.pass_context
@one_line_errors
def stacks_build(ctx, legs, variant, all_variants, force):
    """Build (or reuse) the venv of each LEG with uv."""
    sd, builder = _stacks(ctx), _builder(ctx)
    for leg in legs:
        sf = sd.load(leg)
        variants = [variant] if variant is not None else [None]  # --variant '' is refused, not the base venv
        if all_variants:
            variants += [o.name for o in sf.stack.overrides]
        for v in variants:
            env = builder.ensure(sf, v, force=force)
            click.echo(f"{env.path}  lock sha256 {env.lock_sha256[:12]}  {len(env.manifest['packages'])} packages")


@stacks.group("caches")
def stacks_caches():
    """Carry a leg's compile and JIT caches to another machine (disclosed in every result)."""


def _built(ctx, leg: str, variant: str | None):
    from ablation.envs.builder import venv_name

    sf = _stacks(ctx).load(leg)
    if variant is not None:
        sf.stack.variant(variant)  # an unknown variant is one error line
    env = _builder(ctx).existing(sf, variant)
    if env is None:
        flag = f" --variant {variant}" if variant else ""
        raise AblationError(f"{venv_name(sf.leg, variant)}: not built here; run `ablation stacks build {leg}{flag}` first")
    return env, venv_name(sf.leg, variant)


@stacks_caches.command("show")
@click.argument("leg")
@click.option("--variant", default=None, help="an override variant's venv")
@click.pass_context
@one_line_errors
def caches_show(ctx, leg: str, variant: str | None):
    """What LEG's caches hold, and where they came from."""
    from ablation.envs import caches

    env, name = _built(ctx, leg, variant)
    click.echo(json.dumps({"venv": name, **caches.state(env.path)}, indent=1))


@stacks_caches.command("export")
@click.argument("leg")
@click.option("--variant", default=None, help="an override variant's venv")
@click.option("--out", "out", required=True, type=click.Path(path_type=Path), help="the archive to write (.tgz)")
@click.pass_context
@one_line_errors
def caches_export(ctx, leg: str, variant: str | None, out: Path):
    """Pack LEG's compile and JIT caches, with the venv's name and lock, into one archive."""
    from ablation.envs import caches
    from ablation.execution.machine import probe

    env, name = _built(ctx, leg, variant)
    if out.exists() or out.is_symlink():  # only an earlier archive is replaced, never a file of the user's
        try:
            if not out.is_file() or out.is_symlink():
                raise AblationError("not a regular file")
            caches.read_header(out)
        except AblationError:
            raise AblationError(f"--out {out}: exists and is not a cache archive; refusing to replace it") from None
    m = probe()
    header = caches.export(env.path, name, env.lock_sha256,
                           {"hostname": m.hostname, "gpus": [g.name for g in m.gpus]}, out)
    click.echo(f"{out}: {name}, {header['files']} files, {header['bytes'] / 2**20:.1f} MiB "
               f"({out.stat().st_size / 2**20:.1f} MiB packed), lock {env.lock_sha256[:12]}")


@stacks_caches.command("import")
@click.argument("archives", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.pass_context
@one_line_errors
def caches_import(ctx, archives: tuple[Path, ...]):
    """Unpack archives made by `export` into the venvs they name, built here from the same lock."""
    import platform

    from ablation.envs import caches
    from ablation.spec import identifiers

    for archive in archives:
        if not archive.is_file():
            raise AblationError(f"{archive}: no such file")
        header = caches.read_header(archive)
        leg, _, variant = header["venv"].partition("+")
        identifiers.check(identifiers.leg_name, leg, f"{archive}: field 'venv'")
        if variant:
            identifiers.check(identifiers.variant_name, variant, f"{archive}: field 'venv'")
        env, name = _built(ctx, leg, variant or None)
        origin = caches.import_(archive, header, env.path, name, env.lock_sha256, platform.node())
        packed_on = origin.get("packed_on") if isinstance(origin.get("packed_on"), dict) else {}
        click.echo(one_line(f"{name}: {origin['unpacked_files']} files from {archive.name} (packed on "
                   f"{packed_on.get('hostname', '?')} at {origin.get('packed_at', '?')})"))


@main.command("make-tiny-model")
@click.argument("out_dir", type=click.Path(path_type=Path))
@click.option("--seed", default=0, show_default=True)
@one_line_errors
def make_tiny_model(out_dir: Path, seed: int):
    """Write a 2-layer Llama checkpoint + BPE tokenizer trained here (no hub needed)."""
    from ablation.modeldirs.tiny_llama import make_tiny_llama

    digest = make_tiny_llama(out_dir, seed=seed)
    click.echo(f"{out_dir}  sha256 {digest}")
