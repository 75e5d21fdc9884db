"""Where a worker that torchrun started again goes on from (gossip._torchrun.restart_start),
given every worker's valid checkpoints, and the config and folder Peer.from_env() takes under
torchrun: closed-form cases, with the store's exchange and the checkpoint listing replaced."""

from gossip import _torchrun


def decide(monkeypatch, rank, every):
    """restart_start for `rank` when the workers hold the checkpoint rounds `every` (by rank)."""
    monkeypatch.setattr(_torchrun._gossip, "valid_checkpoints",
                        lambda folder, r: (sorted(every[r]), []))
    monkeypatch.setattr(_torchrun, "_agree", lambda r, size, rounds: [set(s) for s in every])
    return _torchrun.restart_start("runs/x", rank, len(every))


def test_every_worker_resumes_from_the_newest_round_all_hold(monkeypatch):
    every = [{10, 20, 30}, {10, 20, 30}, {20, 30}, {10, 20}]
    for r in range(4):
        s = decide(monkeypatch, r, every)
        assert (s.resume_round, s.rejoin) == (20, False), s


def test_a_worker_without_checkpoints_rejoins_while_the_others_resume(monkeypatch):
    every = [{10, 20}, set(), {10, 20}, {20}]
    assert (decide(monkeypatch, 1, every).rejoin, decide(monkeypatch, 1, every).resume_round) == \
        (True, None)
    for r in (0, 2, 3):
        s = decide(monkeypatch, r, every)
        assert (s.resume_round, s.rejoin) == (20, False), s


def test_with_no_round_in_common_the_run_starts_over(monkeypatch):
    every = [{10}, {20}, set(), {10}]
    for r in range(4):
        s = decide(monkeypatch, r, every)
        assert (s.resume_round, s.rejoin) == (None, False), s
        assert "starts over" in s.why


def test_the_config_is_the_scripts_first_yaml_argument_and_the_folder_the_run_id(tmp_path,
                                                                                monkeypatch):
    config = tmp_path / "run.yaml"
    config.write_text("train: {}\n")
    assert _torchrun.config_argument(["script.py", "--lr", "0.1", str(config)]) == str(config)
    assert _torchrun.config_argument(["script.py", str(tmp_path / "missing.yaml")]) is None
    monkeypatch.delenv("GOSSIP_OUT", raising=False)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "job7")
    assert _torchrun.folder() == "runs/torchrun-job7"
    monkeypatch.setenv("GOSSIP_OUT", "elsewhere")
    assert _torchrun.folder() == "elsewhere"
