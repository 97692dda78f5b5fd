//! CPU pinning and file-descriptor limits for the run.
//!
//! On a machine with at least 2 CPUs the server goes on one CPU (every thread of it, as
//! `taskset -a -p -c` would do, by `sched_setaffinity` on each of its tasks) and this process
//! (every thread, and threads started later inherit it) on another, so that the load generator
//! and the server do not steal each other's core.

use std::fs;

/// What pinning did for one run.
#[derive(Debug, Clone)]
pub struct Pinning {
    /// (server CPU, bench CPU) when applied.
    pub cpus: Option<(usize, usize)>,
    /// Why not, when not applied.
    pub reason: String,
    /// This process's mask before pinning, restored by `restore`.
    saved: Option<libc::cpu_set_t>,
}

impl Pinning {
    /// Pins this process (all its threads) to the second allowed CPU, when `want` and the
    /// machine has at least 2; otherwise records why not.
    pub fn apply(want: bool) -> Pinning {
        if !want {
            return Pinning::off("off (--no-pin)");
        }
        let Some(saved) = get_affinity(0) else {
            return Pinning::off("skipped: sched_getaffinity failed");
        };
        let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
            // SAFETY: CPU_ISSET reads one bit of a set we own.
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &saved) })
            .collect();
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        if allowed.len() < 2 || online < 2 {
            return Pinning::off(&format!(
                "skipped: {} CPU(s) available, pinning needs 2",
                allowed.len().min(online)
            ));
        }
        let (server_cpu, bench_cpu) = (allowed[0], allowed[1]);
        let failed = set_process_affinity(std::process::id() as i32, bench_cpu);
        if failed > 0 {
            return Pinning::off(&format!(
                "skipped: could not pin {failed} thread(s) of the bench"
            ));
        }
        Pinning {
            cpus: Some((server_cpu, bench_cpu)),
            reason: String::new(),
            saved: Some(saved),
        }
    }

    fn off(reason: &str) -> Pinning {
        Pinning {
            cpus: None,
            reason: reason.into(),
            saved: None,
        }
    }

    pub fn applied(&self) -> bool {
        self.cpus.is_some()
    }

    /// Pins every thread of the server process `pid` to the server CPU. Returns a
    /// description for the report.
    pub fn pin_server(&self, pid: i32) -> String {
        let Some((server_cpu, bench_cpu)) = self.cpus else {
            return format!("not pinned ({})", self.reason);
        };
        let failed = set_process_affinity(pid, server_cpu);
        let check = get_affinity(pid)
            // SAFETY: reads bits of a set we own.
            .map(|s| unsafe { libc::CPU_COUNT(&s) == 1 && libc::CPU_ISSET(server_cpu, &s) })
            .unwrap_or(false);
        if failed == 0 && check {
            format!("applied: server (pid {pid}, all threads) on CPU {server_cpu}, bench process on CPU {bench_cpu}")
        } else {
            format!("partly applied: bench on CPU {bench_cpu}; server pid {pid}: {failed} thread(s) could not be pinned to CPU {server_cpu}")
        }
    }

    /// Gives this process back the CPUs it had before `apply`.
    pub fn restore(&mut self) {
        if let Some(saved) = self.saved.take() {
            for tid in tasks(std::process::id() as i32) {
                // SAFETY: sched_setaffinity reads one plain struct that we own.
                unsafe {
                    libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &saved);
                }
            }
        }
    }
}

fn get_affinity(pid: i32) -> Option<libc::cpu_set_t> {
    // SAFETY: sched_getaffinity writes one plain struct that we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

/// The thread ids of a process.
fn tasks(pid: i32) -> Vec<i32> {
    let mut out: Vec<i32> = fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    if out.is_empty() {
        out.push(pid);
    }
    out
}

/// Pins every thread of `pid` to `cpu`; returns how many could not be pinned.
fn set_process_affinity(pid: i32, cpu: usize) -> usize {
    // SAFETY: CPU_ZERO / CPU_SET write bits of a set we own; sched_setaffinity reads it.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        set
    };
    tasks(pid)
        .into_iter()
        .filter(|&tid| {
            // SAFETY: as above.
            unsafe {
                libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
            }
        })
        .count()
}

/// Raises this process's soft RLIMIT_NOFILE to its hard limit (servers started afterwards
/// inherit it). Returns the soft limit now in force.
pub fn raise_nofile() -> u64 {
    // SAFETY: getrlimit / setrlimit read and write one plain struct that we own.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let want = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        lim.rlim_cur as u64
    }
}

/// The machine's online CPUs, whatever this (pinned) process may use.
pub fn online_cpus() -> usize {
    // SAFETY: sysconf reads a constant.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(0) as usize
}
