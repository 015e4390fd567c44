//! A server answered from an event loop: requests queued for a thread that
//! watches `RequestQueue::fd`, answered in any order; a request dropped
//! unanswered, or a queue dropped, answers its caller with an error.

mod support;

use std::time::{Duration, Instant};

use shmlink::{RemoteError, RequestQueue, Server};
use support::{connect, opts_timeout, watchdog, xform, TempDir, T};

fn readable(queue: &RequestQueue) -> bool {
    let soon = Some(Instant::now() + Duration::from_secs(10));
    shmlink_sys::poll::readable(queue.fd(), soon).expect("poll")
        != shmlink_sys::poll::Ready::TimedOut
}

fn answered_from_a_loop(t: T) {
    watchdog("queue", Duration::from_secs(60), move || {
        let dir = TempDir::new(t.scheme());
        let bind = t.bind_addr(&dir, "q");
        let (queue, handler) = RequestQueue::new().expect("queue");
        let server = Server::bind(&[bind.as_str()], Default::default())
            .expect("bind")
            .spawn(handler)
            .expect("spawn");
        let addr = server.addresses()[0].to_string();
        // The loop: answers every two requests in reverse order of arrival;
        // "drop" is dropped unanswered, "fail" fails.
        let looper = std::thread::spawn(move || {
            let mut held = Vec::new();
            let mut answered = 0;
            while answered < 4 * 50 + 2 {
                assert!(readable(&queue), "no request in 10 s");
                while let Some(r) = queue.try_next() {
                    match r.body() {
                        b"drop" => {
                            answered += 1;
                            drop(r);
                        }
                        b"fail" => {
                            answered += 1;
                            r.fail(RemoteError::new(9, "asked to fail"));
                        }
                        _ => held.push(r),
                    }
                    if held.len() == 2 {
                        for r in held.drain(..).rev() {
                            let a = xform(r.body());
                            r.answer(a);
                            answered += 1;
                        }
                    }
                }
                // A lone request left after the others: answer it too.
                if held.len() == 1 && queue.waiting() == 0 {
                    let r = held.remove(0);
                    let a = xform(r.body());
                    r.answer(a);
                    answered += 1;
                }
            }
            queue
        });
        let callers: Vec<_> = (0..4)
            .map(|k| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut c = connect(&addr, opts_timeout(Duration::from_secs(20)));
                    for i in 0..50 {
                        let req = format!("{k}.{i}").into_bytes();
                        assert_eq!(c.call(&req).expect("call"), xform(&req));
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().expect("caller");
        }
        let mut c = connect(&addr, opts_timeout(Duration::from_secs(20)));
        match c.call(b"drop") {
            Err(shmlink::Error::Remote(r)) => assert!(r.message.contains("unanswered"), "{r}"),
            other => panic!("an error for a dropped request, got {other:?}"),
        }
        match c.call(b"fail") {
            Err(shmlink::Error::Remote(r)) => assert_eq!(r.code, 9),
            other => panic!("the loop's error, got {other:?}"),
        }
        let queue = looper.join().expect("loop");
        // The loop ends: its queue dropped, calls are answered with an error.
        drop(queue);
        match c.call(b"late") {
            Err(shmlink::Error::Remote(r)) => assert!(r.message.contains("queue is gone"), "{r}"),
            other => panic!("an error once the loop is gone, got {other:?}"),
        }
        server.stop().expect("stop");
    });
}

#[test]
fn shm_answered_from_a_loop() {
    answered_from_a_loop(T::Shm);
}

#[test]
fn unix_answered_from_a_loop() {
    answered_from_a_loop(T::Unix);
}
