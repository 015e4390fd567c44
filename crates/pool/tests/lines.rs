//! Direct lines (capability bit 7): an `shm:` client calling one at a time
//! gets an idle worker of its own, and its calls skip the pool; the line
//! is taken back when another call needs the worker, when the worker is
//! due for recycling, and given back when the client leaves. Faults on a
//! line fail only the call in hand, with the pool's codes. Real worker
//! processes (`shmlink-echo-worker`); every wait is on a condition with a
//! deadline.

mod support;

use std::time::{Duration, Instant};

use shmlink::{Client, ClientOptions};
use shmlink_pool::{Pool, PoolOptions, Status, CODE_WORKER_DIED, CODE_WORKER_TIMEOUT};
use shmlink_sys::process::{kill, Sig};

use support::{alive, open_fds, pid_of, remote_code, wait_until, Dir, Lines};

const WORKER: &str = env!("CARGO_BIN_EXE_shmlink-echo-worker");

/// More calls than a client makes before it first asks for a line.
const ENOUGH_TO_ASK: usize = 20;

fn pool(dir: &Dir, workers: usize, tune: impl FnOnce(&mut PoolOptions)) -> (Pool, Lines) {
    let mut o = PoolOptions::new(
        vec![format!("shm:{}", dir.path("p.sock").display())],
        vec![WORKER.to_string()],
    );
    o.workers = workers;
    tune(&mut o);
    let lines = Lines::default();
    let pool = Pool::start_with_log(o, lines.log()).expect("pool starts");
    wait_until("workers ready", Duration::from_secs(10), || {
        serving(&pool.status()) == workers
    });
    (pool, lines)
}

fn serving(s: &Status) -> usize {
    s.workers
        .iter()
        .filter(|w| w.serves() && !w.retiring)
        .count()
}

fn states(pool: &Pool) -> Vec<String> {
    pool.status().workers.into_iter().map(|w| w.state).collect()
}

fn client(pool: &Pool) -> Client {
    let addr = pool.addresses()[0].clone();
    Client::connect(
        &addr,
        ClientOptions {
            timeout: Duration::from_secs(20),
            ..Default::default()
        },
    )
    .expect("connect")
}

/// Makes `n` echo calls, each answer checked.
fn echo(c: &mut Client, n: usize, tag: &str) {
    for i in 0..n {
        let req = format!("{tag} {i}");
        let got = c
            .call(req.as_bytes())
            .unwrap_or_else(|e| panic!("{tag} {i}: {e}"));
        assert_eq!(got, format!("echo:{req}").as_bytes());
    }
}

#[test]
fn a_client_calling_one_at_a_time_gets_a_line_and_gives_it_back() {
    let dir = Dir::new("line-basic");
    let (pool, _log) = pool(&dir, 1, |_| {});
    let mut a = client(&pool);
    echo(&mut a, ENOUGH_TO_ASK, "a");
    assert_eq!(
        states(&pool),
        ["direct"],
        "the worker is lent to the client"
    );
    let before = pool.status().calls;
    echo(&mut a, 500, "a on the line");
    assert_eq!(
        pool.status().calls,
        before,
        "calls on a line are counted when it is given back, not relayed"
    );
    drop(a);
    wait_until("the line given back", Duration::from_secs(5), || {
        states(&pool) == ["idle"]
    });
    let s = pool.status();
    assert!(s.calls >= (ENOUGH_TO_ASK + 500) as u64, "{s:?}");
    assert_eq!(s.workers[0].calls, s.calls, "{s:?}");
    assert_eq!(s.errors, 0);
}

#[test]
fn a_second_client_takes_the_worker_back_and_no_call_fails() {
    let dir = Dir::new("line-revoke");
    let (pool, _log) = pool(&dir, 1, |_| {});
    let mut a = client(&pool);
    let mut b = client(&pool);
    echo(&mut a, ENOUGH_TO_ASK, "a");
    assert_eq!(states(&pool), ["direct"]);
    // B needs the only worker: the pool revokes A's line, B is answered.
    let t0 = Instant::now();
    echo(&mut b, 1, "b");
    eprintln!("revoking the line and answering took {:?}", t0.elapsed());
    // A's next call finds its line gone and goes through the pool; the two
    // alternate for a while, every answer checked.
    for round in 0..50 {
        echo(&mut a, 3, &format!("a{round}"));
        echo(&mut b, 3, &format!("b{round}"));
    }
    assert_eq!(pool.status().errors, 0);
}

#[test]
fn without_lines_every_call_goes_through_the_pool() {
    let dir = Dir::new("line-off");
    let (pool, _log) = pool(&dir, 1, |o| o.lines = false);
    let mut a = client(&pool);
    echo(&mut a, 5 * ENOUGH_TO_ASK, "a");
    assert_eq!(states(&pool), ["idle"]);
    assert_eq!(pool.status().calls, (5 * ENOUGH_TO_ASK) as u64);
}

#[test]
fn a_worker_killed_on_a_line_fails_that_call_only() {
    let dir = Dir::new("line-kill");
    let (pool, _log) = pool(&dir, 2, |_| {});
    let mut a = client(&pool);
    echo(&mut a, ENOUGH_TO_ASK, "a");
    let pid = pid_of(&mut a);
    assert!(states(&pool).iter().any(|s| s == "direct"));
    let killer = std::thread::spawn(move || {
        // The call below is on its way when the worker dies: it sleeps 10 s.
        std::thread::sleep(Duration::from_millis(50));
        let at = Instant::now();
        kill(pid, Sig::Kill).expect("kill -9 the lent worker");
        at
    });
    let r = a.call(b"sleep:10000");
    let killed_at = killer.join().expect("killer");
    let took = killed_at.elapsed();
    assert_eq!(remote_code(r), CODE_WORKER_DIED);
    assert!(took < Duration::from_millis(100), "learned in {took:?}");
    echo(&mut a, 10, "a after");
    wait_until("2 workers again", Duration::from_secs(5), || {
        serving(&pool.status()) == 2
    });
}

#[test]
fn a_worker_that_hangs_on_a_line_times_out_and_is_replaced() {
    let dir = Dir::new("line-hang");
    let (pool, _log) = pool(&dir, 1, |o| o.call_timeout = Duration::from_millis(300));
    let mut a = client(&pool);
    echo(&mut a, ENOUGH_TO_ASK, "a");
    assert_eq!(states(&pool), ["direct"]);
    let t0 = Instant::now();
    assert_eq!(remote_code(a.call(b"sleep:60000")), CODE_WORKER_TIMEOUT);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(2),
        "{took:?}"
    );
    // The next call needs the worker back; it does not give it back (it
    // sleeps), so the pool kills it within the call timeout and a new one
    // answers.
    let mut b = client(&pool);
    echo(&mut b, 3, "b");
    assert!(pool.status().restarts >= 1);
}

#[test]
fn recycling_on_a_line_fails_no_call() {
    let dir = Dir::new("line-recycle");
    let (pool, _log) = pool(&dir, 1, |o| o.max_jobs = 50);
    let mut a = client(&pool);
    echo(&mut a, 1000, "a");
    let s = pool.status();
    assert_eq!(s.errors, 0);
    assert!(s.restarts >= 10, "{s:?}");
    assert!(s.workers.iter().all(|w| w.calls <= 50), "{s:?}");
}

#[test]
fn a_client_gone_without_goodbye_frees_its_worker() {
    let dir = Dir::new("line-gone");
    let (pool, _log) = pool(&dir, 1, |_| {});
    let mut a = client(&pool);
    echo(&mut a, ENOUGH_TO_ASK, "a");
    assert_eq!(states(&pool), ["direct"]);
    // As a process killed -9 does: its descriptors close, no goodbye.
    a.forget();
    wait_until("the worker idle again", Duration::from_secs(5), || {
        states(&pool) == ["idle"]
    });
    let mut b = client(&pool);
    echo(&mut b, 3, "b");
}

/// Mappings of direct lines' segments in this process (the pool and its
/// clients run here; the workers are processes of their own).
fn line_maps() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .expect("maps")
        .lines()
        .filter(|l| l.contains("shmlink-line"))
        .count()
}

#[test]
fn workers_killed_at_random_points_on_lines_mix_up_nothing_and_leak_nothing() {
    let dir = Dir::new("line-chaos");
    let (pool, _log) = pool(&dir, 1, |_| {});
    let settled = |what: &str| {
        wait_until(what, Duration::from_secs(10), || {
            states(&pool) == ["idle"] && serving(&pool.status()) == 1
        });
    };
    settled("the pool idle");
    // Descriptors measured after the first round: the server keeps a few
    // segments made ahead, each with its memfd, so "nothing leaked" means
    // no growth from then on. Lines' segments are named apart: none may be
    // left mapped once every line is over.
    let mut fds = None;
    // A small generator of kill points: 0 to 4 ms after the line is up.
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut failed = 0;
    for round in 0..12 {
        let mut c = client(&pool);
        echo(&mut c, ENOUGH_TO_ASK, &format!("warm {round}"));
        assert_eq!(states(&pool), ["direct"], "round {round}");
        let pid = pid_of(&mut c);
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let delay = Duration::from_micros((seed >> 33) % 4000);
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            kill(pid, Sig::Kill).expect("kill -9 the lent worker");
        });
        // Calls go on through the kill: each answer is its own call's; at
        // most the call in hand fails, with the documented code.
        let mut lost = 0;
        for i in 0..3000 {
            let req = format!("r{round} {i}");
            match c.call(req.as_bytes()) {
                Ok(got) => assert_eq!(got, format!("echo:{req}").as_bytes(), "round {round}"),
                Err(e) => {
                    assert_eq!(remote_code(Err(e)), CODE_WORKER_DIED, "round {round}");
                    lost += 1;
                }
            }
        }
        killer.join().expect("killer");
        assert!(lost <= 1, "round {round}: {lost} calls failed");
        failed += lost;
        drop(c);
        settled("the pool back to one idle worker");
        if round == 0 {
            fds = Some(open_fds());
        }
    }
    let fds = fds.expect("measured after the first round");
    eprintln!("calls failed by the 12 kills: {failed}");
    wait_until(
        "no descriptor more, no line mapped",
        Duration::from_secs(10),
        || open_fds() <= fds && line_maps() == 0,
    );
}

#[test]
fn stopping_the_pool_ends_its_lines() {
    let dir = Dir::new("line-stop");
    let (pool, _log) = pool(&dir, 1, |_| {});
    let mut a = client(&pool);
    echo(&mut a, ENOUGH_TO_ASK, "a");
    assert_eq!(states(&pool), ["direct"]);
    let pid = pid_of(&mut a);
    let t0 = Instant::now();
    pool.stop();
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(5), "the stop took {took:?}");
    wait_until("the lent worker exited", Duration::from_secs(5), || {
        !alive(pid)
    });
    // The line ended with the worker, the session with the pool: the next
    // call fails at once, it does not hang.
    let t0 = Instant::now();
    assert!(a.call(b"after the stop").is_err());
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}
