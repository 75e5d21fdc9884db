"""A Python peer as mpirun or srun starts it: everything from the environment
(`Peer.from_env()`: GOSSIP_CONFIG, GOSSIP_OUT and the rank mpirun gives), gossip's own model,
the plan's rounds."""
import gossip

peer = gossip.Peer.from_env()
peer.join_model()
while peer.rounds_done < peer._peer.planned_rounds:
    peer.step_round()
    if peer.eval_due():
        peer.report()
peer.finish()
