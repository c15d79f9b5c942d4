#!/usr/bin/env python3
"""Writes the labelled HPC log fixtures next to this file.

Each set is a directory <Name>/ with <Name>_hpc.log (one message a line) and
<Name>_hpc.log_structured_corrected.csv (LineId, Content, EventId,
EventTemplate), the layout of the LogHub samples, so that
/work/shared/tools/logparse_eval.py reads them. Messages follow the formats
these programs print (format strings of Slurm 22.05 slurmctld/slurmd, Lustre
2.15 client/server console messages, mlx5_core/ipoib kernel messages and
OpenSM's log, Linux MCE/EDAC/OOM/watchdog kernel messages, Cray XC console
and hardware-error log lines); every value is drawn at random, so nothing is
from a real system. Templates are labelled by hand, one <*> per value as the
corrected LogHub labels do ("host:port" is "<*>:<*>").

    python3 gen.py     # deterministic: the same files every time
"""
import csv, os, random

R = random.Random(13)
nid = lambda: R.randrange(1, 4096)
node = lambda: "cn%04d" % nid()
job = lambda: R.randrange(100000, 999999)
ip = lambda: "10.%d.%d.%d" % (R.randrange(256), R.randrange(256), R.randrange(1, 255))
hx = lambda n: "%0*x" % (n, R.getrandbits(4 * n))
pci = lambda: "0000:%02x:00.%d" % (R.randrange(256), R.randrange(2))
ts = lambda: "2026-%02d-%02dT%02d:%02d:%02d" % (R.randrange(1, 13), R.randrange(1, 29), R.randrange(24), R.randrange(60), R.randrange(60))
fsname = lambda: R.choice(["scratch", "home", "proj", "lus01"])
ost = lambda: "%s-OST%04x" % (fsname(), R.randrange(96))
nidaddr = lambda: ip() + "@o2ib"
cname = lambda: "c%d-%dc%ds%dn%d" % (R.randrange(8), R.randrange(2), R.randrange(3), R.randrange(16), R.randrange(4))
uid = lambda: R.randrange(1000, 60000)
prog = lambda: R.choice(["python3", "lmp_mpi", "vasp_std", "gmx_mpi", "a.out", "namd2", "cp2k.psmp"])

SETS = {
    "Slurm": [
        (lambda: "_slurm_rpc_submit_batch_job: JobId=%d InitPrio=%d usec=%d" % (job(), R.randrange(1, 20000), R.randrange(100, 9000)),
         "_slurm_rpc_submit_batch_job: JobId=<*> InitPrio=<*> usec=<*>"),
        (lambda: "sched: Allocate JobId=%d NodeList=%s #CPUs=%d Partition=%s" % (job(), R.choice([node(), "cn[%04d-%04d]" % (nid(), nid())]), R.choice([1, 8, 64, 128, 256]), R.choice(["batch", "gpu", "debug", "long"])),
         "sched: Allocate JobId=<*> NodeList=<*> #CPUs=<*> Partition=<*>"),
        (lambda: "_job_complete: JobId=%d WEXITSTATUS %d" % (job(), R.choice([0, 0, 0, 1, 2, 137])),
         "_job_complete: JobId=<*> WEXITSTATUS <*>"),
        (lambda: "_job_complete: JobId=%d done" % job(), "_job_complete: JobId=<*> done"),
        (lambda: "Time limit exhausted for JobId=%d" % job(), "Time limit exhausted for JobId=<*>"),
        (lambda: "error: Nodes %s not responding" % R.choice([node(), "cn[%04d-%04d]" % (nid(), nid())]), "error: Nodes <*> not responding"),
        (lambda: "Node %s now responding" % node(), "Node <*> now responding"),
        (lambda: "update_node: node %s reason set to: %s" % (node(), R.choice(["Kill task failed", "Not responding", "NHC: check_hw_ib failed", "maintenance"])),
         "update_node: node <*> reason set to: <*>"),
        (lambda: "update_node: node %s state set to %s" % (node(), R.choice(["DRAINED", "DRAINING", "DOWN", "IDLE", "RESUME"])),
         "update_node: node <*> state set to <*>"),
        (lambda: "backfill: Started JobId=%d in %s on %s" % (job(), R.choice(["batch", "gpu", "debug", "long"]), node()),
         "backfill: Started JobId=<*> in <*> on <*>"),
        (lambda: "_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=%d uid %d" % (job(), uid()),
         "_slurm_rpc_kill_job: REQUEST_KILL_JOB JobId=<*> uid <*>"),
        (lambda: "error: slurm_receive_msg [%s:%d]: Zero Bytes were transmitted or received" % (ip(), R.randrange(1024, 65535)),
         "error: slurm_receive_msg [<*>:<*>]: Zero Bytes were transmitted or received"),
        (lambda: "launch task StepId=%d.%d request from UID:%d GID:%d HOST:%s PORT:%d" % (job(), R.randrange(8), uid(), uid(), ip(), R.randrange(1024, 65535)),
         "launch task StepId=<*> request from UID:<*> GID:<*> HOST:<*> PORT:<*>"),
        (lambda: "[%d.batch] done with job" % job(), "[<*>] done with job"),
        (lambda: "[%d.%d] done with job" % (job(), R.randrange(8)), "[<*>] done with job"),
        (lambda: "Launching batch job %d for UID %d" % (job(), uid()), "Launching batch job <*> for UID <*>"),
        (lambda: "error: *** JOB %d ON %s CANCELLED AT %s DUE TO TIME LIMIT ***" % (job(), node(), ts()),
         "error: *** JOB <*> ON <*> CANCELLED AT <*> DUE TO TIME LIMIT ***"),
        (lambda: "error: *** STEP %d.%d ON %s CANCELLED AT %s ***" % (job(), R.randrange(8), node(), ts()),
         "error: *** STEP <*> ON <*> CANCELLED AT <*> ***"),
        (lambda: "_handle_stray_script: Purging vestigial job script /var/spool/slurmd/job%05d/slurm_script" % job(),
         "_handle_stray_script: Purging vestigial job script <*>"),
        (lambda: "error: Detected %d oom_kill event in StepId=%d.batch. Some of the step tasks have been OOM Killed." % (R.randrange(1, 4), job()),
         "error: Detected <*> oom_kill event in StepId=<*> Some of the step tasks have been OOM Killed."),
        (lambda: "slurmd version 22.05.8 started", "slurmd version <*> started"),
        (lambda: "error: Node %s has low real_memory size (%d < %d)" % (node(), R.randrange(100000, 250000), 256000),
         "error: Node <*> has low real_memory size (<*> < <*>)"),
    ],
    "Lustre": [
        (lambda: "LustreError: 11-0: %s-osc-ffff%s: operation ost_connect to node %s failed: rc = -%d" % (ost(), hx(12), nidaddr(), R.choice([16, 19, 110])),
         "LustreError: <*>: <*>: operation ost_connect to node <*> failed: rc = <*>"),
        (lambda: "LustreError: 167-0: %s-osc-ffff%s: This client was evicted by %s; in progress operations using this service will fail." % (ost(), hx(12), ost()),
         "LustreError: <*>: <*>: This client was evicted by <*>; in progress operations using this service will fail."),
        (lambda: "Lustre: %s-osc-ffff%s: Connection to %s (at %s) was lost; in progress operations using this service will wait for recovery to complete" % (ost(), hx(12), ost(), nidaddr()),
         "Lustre: <*>: Connection to <*> (at <*>) was lost; in progress operations using this service will wait for recovery to complete"),
        (lambda: "Lustre: %s-osc-ffff%s: Connection restored to %s (at %s)" % (ost(), hx(12), nidaddr(), nidaddr()),
         "Lustre: <*>: Connection restored to <*> (at <*>)"),
        (lambda: "LNetError: %d:0:(o2iblnd_cb.c:3075:kiblnd_check_txs_locked()) Timed out tx: tx_queue, %d seconds" % (R.randrange(100, 40000), R.randrange(1, 60)),
         "LNetError: <*>:<*>:(o2iblnd_cb.c:<*>:kiblnd_check_txs_locked()) Timed out tx: tx_queue, <*> seconds"),
        (lambda: "LNetError: %d:0:(o2iblnd_cb.c:3150:kiblnd_check_conns()) Timed out RDMA with %s (%d): c: %d, oc: %d, rc: %d" % (R.randrange(100, 40000), nidaddr(), R.randrange(1, 200), R.randrange(8), R.randrange(8), R.randrange(8)),
         "LNetError: <*>:<*>:(o2iblnd_cb.c:<*>:kiblnd_check_conns()) Timed out RDMA with <*> (<*>): c: <*>, oc: <*>, rc: <*>"),
        (lambda: "LustreError: %d:0:(file.c:4123:ll_inode_revalidate_fini()) %s: revalidate FID [0x%x:0x%x:0x0] error: rc = -%d" % (R.randrange(100, 40000), fsname(), R.getrandbits(33), R.randrange(1, 5000), R.choice([2, 5, 108])),
         "LustreError: <*>:<*>:(file.c:<*>:ll_inode_revalidate_fini()) <*>: revalidate FID [<*>:<*>:<*>] error: rc = <*>"),
        (lambda: "Lustre: %s-MDT0000: haven't heard from client %s-%s-%s-%s-%s (at %s) in %d seconds. I think it's dead, and I am evicting it. exp ffff%s, cur %d expire %d last %d" % (fsname(), hx(8), hx(4), hx(4), hx(4), hx(12), nidaddr(), R.randrange(150, 400), hx(12), R.randrange(1700000000, 1800000000), R.randrange(1700000000, 1800000000), R.randrange(1700000000, 1800000000)),
         "Lustre: <*>: haven't heard from client <*> (at <*>) in <*> seconds. I think it's dead, and I am evicting it. exp <*>, cur <*> expire <*> last <*>"),
        (lambda: "Lustre: %s: Client %s-%s-%s-%s-%s (at %s) reconnecting" % (ost(), hx(8), hx(4), hx(4), hx(4), hx(12), nidaddr()),
         "Lustre: <*>: Client <*> (at <*>) reconnecting"),
        (lambda: "Lustre: %s: Recovery over after %d:%02d, of %d clients %d recovered and %d were evicted." % (ost(), R.randrange(10), R.randrange(60), R.randrange(100, 4000), R.randrange(100, 4000), R.randrange(10)),
         "Lustre: <*>: Recovery over after <*>:<*>, of <*> clients <*> recovered and <*> were evicted."),
        (lambda: "LustreError: %d:0:(ldlm_lockd.c:261:expired_lock_main()) ### lock callback timer expired after %ds: evicting client at %s  ns: filter-%s_UUID lock: ffff%s/0x%s lrc: 3/0,0 mode: PW/PW" % (R.randrange(100, 40000), R.randrange(100, 1000), nidaddr(), ost(), hx(12), hx(16)),
         "LustreError: <*>:<*>:(ldlm_lockd.c:<*>:expired_lock_main()) ### lock callback timer expired after <*>: evicting client at <*> ns: <*> lock: <*> lrc: <*> mode: <*>"),
    ],
    "InfiniBand": [
        (lambda: "mlx5_core %s ib%d: Link down" % (pci(), R.randrange(2)), "mlx5_core <*> <*>: Link down"),
        (lambda: "mlx5_core %s ib%d: Link up" % (pci(), R.randrange(2)), "mlx5_core <*> <*>: Link up"),
        (lambda: "mlx5_core %s: mlx5_cmd_check:%d:(pid %d): CREATE_MKEY(0x200) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x%s)" % (pci(), R.choice([756, 810]), R.randrange(100, 40000), hx(6)),
         "mlx5_core <*>: mlx5_cmd_check:<*>:(pid <*>): CREATE_MKEY(<*>) op_mod(<*>) failed, status bad parameter(<*>), syndrome (<*>)"),
        (lambda: "mlx5_core %s: Port module event: module %d, Cable %s" % (pci(), R.randrange(2), R.choice(["plugged", "unplugged"])),
         "mlx5_core <*>: Port module event: module <*>, Cable <*>"),
        (lambda: "mlx5_core %s: mlx5_pcie_event:%d:(pid %d): PCIe slot advertised sufficient power (%dW)." % (pci(), 301, R.randrange(100, 40000), R.choice([25, 75])),
         "mlx5_core <*>: mlx5_pcie_event:<*>:(pid <*>): PCIe slot advertised sufficient power (<*>)."),
        (lambda: "ib%d: ipoib_cm_handle_tx_wc: failed cm send event (status=%d, wrid=%d vend_err %d)" % (R.randrange(2), R.randrange(1, 20), R.randrange(1000), R.randrange(256)),
         "<*>: ipoib_cm_handle_tx_wc: failed cm send event (status=<*>, wrid=<*> vend_err <*>)"),
        (lambda: "ib%d: transmit timeout: latency %d msecs" % (R.randrange(2), R.randrange(1000, 100000)), "<*>: transmit timeout: latency <*> msecs"),
        (lambda: "infiniband mlx5_%d: mlx5_ib_event:%d:(pid %d): warning: event on port %d" % (R.randrange(4), 3045, R.randrange(100, 40000), R.randrange(1, 3)),
         "infiniband <*>: mlx5_ib_event:<*>:(pid <*>): warning: event on port <*>"),
        (lambda: "log_trap_info: Received Generic Notice type:1 num:128 (Link state change) Producer:2 (Switch) from LID:%d TID:0x%s" % (R.randrange(1, 5000), hx(16)),
         "log_trap_info: Received Generic Notice type:<*> num:<*> (Link state change) Producer:<*> (Switch) from LID:<*> TID:<*>"),
        (lambda: "osm_spst_rcv_process: ERR 3806: Port 0x%s, state change from %s to %s" % (hx(16), R.choice(["ACTIVE", "INIT", "ARMED"]), R.choice(["DOWN", "INIT"])),
         "osm_spst_rcv_process: ERR <*>: Port <*>, state change from <*> to <*>"),
        (lambda: "SUBNET UP", "SUBNET UP"),
        (lambda: "Entering MASTER state", "Entering MASTER state"),
        (lambda: "osm_ucast_mgr_process: ucast_mgr_process: %d switches, %d ports, heavy sweep" % (R.randrange(10, 400), R.randrange(100, 20000)),
         "osm_ucast_mgr_process: ucast_mgr_process: <*> switches, <*> ports, heavy sweep"),
        (lambda: "Removing port with GUID 0x%s" % hx(16), "Removing port with GUID <*>"),
    ],
    "Kernel": [
        (lambda: "mce: [Hardware Error]: Machine check events logged", "mce: [Hardware Error]: Machine check events logged"),
        (lambda: "mce: [Hardware Error]: CPU %d: Machine Check: 0 Bank %d: %s" % (R.randrange(128), R.randrange(24), hx(16)),
         "mce: [Hardware Error]: CPU <*>: Machine Check: <*> Bank <*>: <*>"),
        (lambda: "mce: [Hardware Error]: TSC 0 ADDR %s MISC %s" % (hx(10), hx(10)), "mce: [Hardware Error]: TSC <*> ADDR <*> MISC <*>"),
        (lambda: "mce: [Hardware Error]: PROCESSOR 0:%x TIME %d SOCKET %d APIC %x microcode %x" % (R.choice([0x50654, 0x606a6]), R.randrange(1700000000, 1800000000), R.randrange(2), R.randrange(256), R.getrandbits(28)),
         "mce: [Hardware Error]: PROCESSOR <*>:<*> TIME <*> SOCKET <*> APIC <*> microcode <*>"),
        (lambda: "EDAC MC%d: %d CE memory read error on CPU_SrcID#%d_MC#%d_Chan#%d_DIMM#%d (channel:%d slot:%d page:0x%x offset:0x0 grain:32 syndrome:0x0)" % ((R.randrange(4),) + (R.randrange(1, 5),) + tuple(R.randrange(4) for _ in range(6)) + (R.getrandbits(20),)),
         "EDAC <*>: <*> CE memory read error on <*> (channel:<*> slot:<*> page:<*> offset:<*> grain:<*> syndrome:<*>)"),
        (lambda: "Out of memory: Killed process %d (%s) total-vm:%dkB, anon-rss:%dkB, file-rss:%dkB, shmem-rss:%dkB, UID:%d pgtables:%dkB oom_score_adj:0" % (R.randrange(1000, 4000000), prog(), R.getrandbits(30), R.getrandbits(28), R.getrandbits(16), R.getrandbits(12), uid(), R.getrandbits(16)),
         "Out of memory: Killed process <*> (<*>) total-vm:<*>, anon-rss:<*>, file-rss:<*>, shmem-rss:<*>, UID:<*> pgtables:<*> oom_score_adj:<*>"),
        (lambda: "watchdog: BUG: soft lockup - CPU#%d stuck for %ds! [%s:%d]" % (R.randrange(128), R.randrange(21, 60), prog(), R.randrange(1000, 4000000)),
         "watchdog: BUG: soft lockup - CPU#<*> stuck for <*>! [<*>:<*>]"),
        (lambda: "INFO: task %s:%d blocked for more than %d seconds." % (prog(), R.randrange(1000, 4000000), R.choice([120, 241, 362])),
         "INFO: task <*>:<*> blocked for more than <*> seconds."),
        (lambda: "nfs: server %s not responding, still trying" % R.choice(["nfs01", "nfs02", "home-nfs", "10.0.0.5"]), "nfs: server <*> not responding, still trying"),
        (lambda: "nfs: server %s OK" % R.choice(["nfs01", "nfs02", "home-nfs", "10.0.0.5"]), "nfs: server <*> OK"),
        (lambda: "CPU%d: Core temperature above threshold, cpu clock throttled (total events = %d)" % (R.randrange(128), R.randrange(1, 100000)),
         "<*>: Core temperature above threshold, cpu clock throttled (total events = <*>)"),
        (lambda: "CPU%d: Package temperature/speed normal" % R.randrange(128), "<*>: Package temperature/speed normal"),
        (lambda: "%s[%d]: segfault at %s ip %s sp %s error %d in %s[%s+%x]" % (prog(), R.randrange(1000, 4000000), hx(12), hx(16), hx(16), R.choice([4, 6, 14]), R.choice(["libc.so.6", "libmpi.so.40", "a.out"]), hx(12), R.getrandbits(20)),
         "<*>[<*>]: segfault at <*> ip <*> sp <*> error <*> in <*>[<*>+<*>]"),
        (lambda: "XFS (%s): Metadata corruption detected at xfs_dinode_verify+0x%x/0x%x [xfs], inode 0x%x dinode" % (R.choice(["sda1", "md0", "nvme0n1p2"]), R.getrandbits(10), R.getrandbits(11), R.getrandbits(32)),
         "XFS (<*>): Metadata corruption detected at <*> [xfs], inode <*> dinode"),
    ],
    "Cray": [
        (lambda: "HWERR[%s][%d]:0x%04x:SSID RSP A_STATUS_INVALID_ADDRESS Error:Info1=0x%s:Info2=0x%s:Info3=0x%s" % (cname(), R.randrange(1, 2000), R.getrandbits(16), hx(16), hx(16), hx(4)),
         "HWERR[<*>][<*>]:<*>:SSID RSP A_STATUS_INVALID_ADDRESS Error:Info1=<*>:Info2=<*>:Info3=<*>"),
        (lambda: "HWERR[%s][%d]:0x%04x:Correctable Memory Error:Info1=0x%s:Info2=0x%s" % (cname(), R.randrange(1, 2000), R.getrandbits(16), hx(16), hx(16)),
         "HWERR[<*>][<*>]:<*>:Correctable Memory Error:Info1=<*>:Info2=<*>"),
        (lambda: "ec_node_failed: src:::%s svc:::%s" % (cname(), cname()), "ec_node_failed: src:::<*> svc:::<*>"),
        (lambda: "ec_heartbeat_stop: src:::%s svc:::%s warn node heartbeat_fault" % (cname(), cname()), "ec_heartbeat_stop: src:::<*> svc:::<*> warn node heartbeat_fault"),
        (lambda: "<node_health> %s (nid %05d) failed test %s: exit %d" % (cname(), nid(), R.choice(["Accelerator", "Filesystem", "Application", "Memory"]), R.randrange(1, 4)),
         "<node_health> <*> (nid <*>) failed test <*>: exit <*>"),
        (lambda: "Node %s (nid %05d) is in state %s" % (cname(), nid(), R.choice(["down", "admindown", "suspect", "up"])),
         "Node <*> (nid <*>) is in state <*>"),
        (lambda: "Lustre: %s-osc-ffff%s: Connection restored to %s (at %s)" % (ost(), hx(12), nidaddr(), nidaddr()),
         "Lustre: <*>: Connection restored to <*> (at <*>)"),
        (lambda: "xtnlrd: Link failure on %s LCB %s%d%d" % (cname(), R.choice(["c0-0c0s", "c1-0c2s"]), R.randrange(16), R.randrange(8)),
         "xtnlrd: Link failure on <*> LCB <*>"),
        (lambda: "aprun: Apid %d: Caught signal Terminated, sending to application" % R.randrange(1000000, 99999999),
         "aprun: Apid <*>: Caught signal Terminated, sending to application"),
        (lambda: "Apid %d: OOM killer terminated this process." % R.randrange(1000000, 99999999), "Apid <*>: OOM killer terminated this process."),
        (lambda: "Cray HSS: %s:%d: bc_cpu_temp alarm: CPU%d %dC over threshold %dC" % (cname(), R.randrange(1, 100), R.randrange(2), R.randrange(90, 110), 90),
         "Cray HSS: <*>:<*>: bc_cpu_temp alarm: <*> <*> over threshold <*>"),
    ],
}

here = os.path.dirname(os.path.abspath(__file__))
for name, events in SETS.items():
    d = os.path.join(here, name)
    os.makedirs(d, exist_ok=True)
    # Frequent and rare events, as in a real log: weights 1/(rank+1).
    w = [1 / (i + 1) for i in range(len(events))]
    order = list(range(len(events)))
    R.shuffle(order)
    rows = []
    for line in range(1, 1001):
        k = R.choices(order, weights=w)[0] if line > len(events) else line - 1
        gen, tmpl = events[k]
        rows.append((line, gen(), "E%d" % (k + 1), tmpl))
    R.shuffle(rows)
    base = os.path.join(d, name + "_hpc.log")
    with open(base, "w") as f:
        for r in rows:
            f.write(r[1] + "\n")
    with open(base + "_structured_corrected.csv", "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["LineId", "Content", "EventId", "EventTemplate"])
        for i, r in enumerate(rows, 1):
            wr.writerow([i, r[1], r[2], r[3]])
