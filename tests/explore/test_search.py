"""How the search draws its cases: around the scenario's own faults, over a swarm's part of
the space, and from a corpus of cases that reached something new, batch by batch, so that
case i never depends on how many workers ran the cases before it; and how it tells a
person what it found, in one screen."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

from elastic_sim.cases import Case, Outcome
from elastic_sim.corpus import BATCH, LAG, Planner
from elastic_sim.draws import Search, make_case
from elastic_sim.explore import space_for
from elastic_sim.faults.around import Around, moves
from elastic_sim.faults.model import CrashHost, HangHost
from elastic_sim.faults.schedule import FaultSpace, RandomChooser, shrink_candidates
from elastic_sim.faults.swarm import swarm
from elastic_sim.findings import SCREEN, Finding, listing
from elastic_sim.mechanisms import Record, Signature
from elastic_sim.testing import load

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
SPACE = FaultSpace(hosts=("h0", "h1", "h2", "h3"), horizon=10.0,
                   types=("crash", "hang", "partition", "signal"), max_duration=5.0,
                   startup=1.0)
OWN = (CrashHost("own-crash", 2.5, "h3"), HangHost("own-hang", 4.0, "h1", 6.0))


def test_every_case_keeps_the_scenario_s_faults_moved_within_their_bounds() -> None:
    around = Around(OWN, shift=1.0, scale=2.0, retarget=False)
    for i in range(40):
        case = make_case(7, i, SPACE, around=around, swarm=True)
        own = {f.id: f for f in case.faults if f.id.startswith("own")}
        assert set(own) == {"own-crash", "own-hang"}
        assert abs(own["own-crash"].at - 2.5) <= 1.0
        hang = own["own-hang"]
        assert isinstance(hang, HangHost) and hang.host == "h1"
        assert 3.0 <= hang.duration <= 12.0
        assert all(("moved" in line) for line in moves(case.faults, around))


def test_a_shrink_never_drops_the_scenario_s_faults_and_puts_them_back_first() -> None:
    moved = dataclasses.replace(OWN[1], at=5.0)
    schedule = (OWN[0], moved, CrashHost("x0-crash", 6.0, "h2"))
    pinned = {f.id: f for f in OWN}
    cands = shrink_candidates(schedule, pinned)
    assert cands[0] == (OWN[0], OWN[1], schedule[2])  # as written, first
    assert all({"own-crash", "own-hang"} <= {f.id for f in c} for c in cands)


def test_a_swarm_draws_some_types_and_some_hosts() -> None:
    seen_types: Counter[int] = Counter()
    for i in range(50):
        sub = swarm(RandomChooser(__import__("random").Random(i)), SPACE)
        assert sub.types and set(sub.types) <= set(SPACE.types)
        assert sub.aimable and set(sub.aimable) <= set(SPACE.hosts)
        assert sub.hosts == SPACE.hosts  # a cut still divides the whole cluster
        seen_types[len(sub.types)] += 1
    assert len(seen_types) > 2


def _outcome(case: Case, reached: set[str]) -> Outcome:
    return Outcome(case, [], {}, False, reached=frozenset(reached))


def test_a_case_is_drawn_from_the_corpus_as_batches_two_back_left_it() -> None:
    sc = load(SCENARIOS / "scale_down.yaml")
    search = Search(sc, (), 3, space_for(sc, max_duration=30.0), ties=True)

    def drawn(eager: bool) -> list[Case]:
        planner = Planner(search)
        out: list[Case] = []
        done = 0
        for i in range(4 * BATCH):
            if eager:  # draw as far ahead as the planner allows before judging
                while not planner.ready(i):
                    planner.observe(_outcome(out[done], {f"s:{done % 5}", f"t:{done}"}))
                    done += 1
            else:  # judge every case before drawing the next
                while done < i:
                    planner.observe(_outcome(out[done], {f"s:{done % 5}", f"t:{done}"}))
                    done += 1
            assert planner.ready(i)
            out.append(planner.case(i))
        return out

    lazy, eager = drawn(False), drawn(True)
    assert lazy == eager
    assert not Planner(search).ready(LAG * BATCH)  # batch 2 waits for batch 0
    # some cases are mutations of earlier ones: the same sim seed, another schedule
    seeds = Counter(c.seed for c in lazy)
    assert max(seeds.values()) > 1


def _finding(i: int, known: bool) -> Finding:
    sig = Signature(f"check{i % 7}", "job_failed,run_end", f"member:E{i}|-:failed")
    f = Finding(sig, "m" * 150, i, (), (), 0, known=Record(str(sig), "x.yaml") if known
                else None, standing="weak_spot")
    f.fault_types.update({"crash": 2, "hang": 1, "partition": 1, "signal": 1})
    return f


def test_the_console_list_fits_on_one_screen_new_first() -> None:
    findings = [_finding(i, known=i % 3 == 0) for i in range(90)]
    lines = listing(findings)
    assert len(lines) <= SCREEN
    assert lines[1] == "NEW" and any(line.startswith("KNOWN") for line in lines)
    assert "more new mechanisms in explore.json" in "\n".join(lines)
    assert lines[0].startswith("90 mechanisms: 60 new")


def test_every_reproducer_of_a_search_around_two_faults_holds_them(tmp_path: Path) -> None:
    import json

    import yaml

    from elastic_sim.cli import main

    # torchrun's three agents: the static protocol rides these two out on every draw
    raw = yaml.safe_load((SCENARIOS / "torchelastic" / "scale_down.yaml").read_text())
    raw["faults"] = [{"id": "crash-h2", "type": "crash", "host": "h2", "at": 2.55},
                     {"id": "cut-h1", "type": "partition", "at": 4.0, "duration": 8.0,
                      "groups": [["h1"], ["h0", "h2"]]}]
    src = tmp_path / "user.yaml"
    src.write_text(yaml.safe_dump(raw))
    out = tmp_path / "x"
    main(["explore", str(src), "--budget", "16", "--out", str(out), "--reports", "none",
          "--max-duration", "30"])
    found = json.loads((out / "explore.json").read_text())
    assert found["around"]["faults"] and found["violations"]
    for v in found["violations"]:
        repro = yaml.safe_load(Path(v["reproducer"]).read_text())
        ids = {f["id"] for f in repro["faults"]}
        assert {"crash-h2", "cut-h1"} <= ids, v["mechanism"]
        written = {f["id"]: f for f in raw["faults"]}
        moved = [f["id"] for f in repro["faults"] if f["id"] in written
                 and any(f.get(k) != written[f["id"]].get(k) for k in ("at", "duration"))]
        for fid in moved:
            assert f"{fid} moved" in repro["description"]
