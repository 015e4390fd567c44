//! Publish/subscribe's vectors (docs/protocol.md, "Publish/subscribe"):
//! attach offers in both modes, a copied sample's head, a detach notice,
//! and offers a subscriber must refuse.

use serde_json::{json, Value};
use shmlink::wire::pubsub::{
    decode_detach, decode_sample, encode_detach, encode_sample_head, queue_len, Attach, Mode,
};

use super::{invalid, n, refused, unhex, valid};

fn shared() -> Attach {
    Attach {
        version: 1,
        mode: Mode::Shared,
        topic: "prices".into(),
        sample_size: 100,
        slots: 1217,
        depth: 64,
        returns: 72,
        max_held: 8,
        history: 16,
        slot_stride: 128,
        next_seq: 41,
        queue_len: queue_len(64, 72),
    }
}

fn copy() -> Attach {
    Attach {
        mode: Mode::Copy,
        slots: 0,
        returns: 0,
        slot_stride: 0,
        queue_len: 0,
        ..shared()
    }
}

fn attach_fields(a: &Attach) -> Value {
    json!({"kind": "attach", "version": a.version,
           "mode": match a.mode { Mode::Shared => 0, Mode::Copy => 1 },
           "topic": a.topic, "sample_size": a.sample_size, "slots": a.slots,
           "depth": a.depth, "returns": a.returns, "max_held": a.max_held,
           "history": a.history, "slot_stride": n(a.slot_stride),
           "next_seq": n(a.next_seq), "queue_len": n(a.queue_len),
           "pool_len": n(a.pool_len())})
}

/// The section's vectors.
pub(crate) fn build() -> Vec<Value> {
    let with = |f: &dyn Fn(&mut Attach)| {
        let mut a = shared();
        f(&mut a);
        a.encode()
    };
    let mut reserved = shared().encode();
    reserved[11] = 1;
    vec![
        valid(
            "attach, shared: 'prices', 100-byte samples in 1217 slots of 128, depth 64, 8 held, history 16",
            &shared().encode(),
            attach_fields(&shared()),
        ),
        valid("attach, copy", &copy().encode(), attach_fields(&copy())),
        valid(
            "sample head (copy mode): seq 41, then 3 bytes",
            &[&encode_sample_head(41)[..], b"abc"].concat(),
            json!({"kind": "sample", "seq": 41, "bytes_hex": "616263"}),
        ),
        valid(
            "detach: the publisher closed",
            &encode_detach("the publisher of topic 'prices' at shm:/run/p.sock closed"),
            json!({"kind": "detach", "text": "the publisher of topic 'prices' at shm:/run/p.sock closed"}),
        ),
        invalid("attach of version 2", &with(&|a| a.version = 2), "version 2"),
        invalid("attach with reserved bytes set", &reserved, "reserved"),
        invalid("attach, depth 0", &with(&|a| a.depth = 0), "depth 0"),
        invalid("attach, history deeper than the queue", &with(&|a| a.history = 65), "history 65"),
        invalid(
            "attach, returns below depth + max_held",
            &with(&|a| a.returns = 71),
            "returns 71",
        ),
        invalid(
            "attach, stride not a multiple of 64",
            &with(&|a| a.slot_stride = 100),
            "slot_stride 100",
        ),
        invalid(
            "attach, queue_len that is not the layout's",
            &with(&|a| a.queue_len += 64),
            "queue_len",
        ),
        invalid(
            "attach, copy mode naming a pool",
            &Attach { slots: 3, ..copy() }.encode(),
            "copy mode",
        ),
        invalid(
            "attach, a topic length beyond the bytes",
            &shared().encode()[..66],
            "topic of 6 bytes",
        ),
        invalid(
            "detach, text length beyond the bytes",
            &encode_detach("closed")[..20],
            "announces 6 bytes",
        ),
    ]
}

/// Decodes every vector of the section and checks it.
pub(crate) fn check(cases: &[Value], check_fields: &dyn Fn(&str, &Value, &Value)) {
    for c in cases {
        let what = format!("pubsub {}", c["name"]);
        let b = unhex(c["hex"].as_str().expect("hex"));
        if c["valid"] == json!(false) {
            let r = if b.starts_with(b"SLPSDTCH") {
                decode_detach(&b).map(drop)
            } else {
                Attach::decode(&b).map(drop)
            };
            refused(&what, c, r);
            continue;
        }
        let d = &c["decoded"];
        let got = match d["kind"].as_str().expect("kind") {
            "attach" => {
                attach_fields(&Attach::decode(&b).unwrap_or_else(|e| panic!("{what}: {e}")))
            }
            "sample" => {
                let (seq, bytes) = decode_sample(&b).unwrap_or_else(|e| panic!("{what}: {e}"));
                let hex: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
                json!({"kind": "sample", "seq": n(seq), "bytes_hex": hex})
            }
            "detach" => json!({"kind": "detach",
                               "text": decode_detach(&b).unwrap_or_else(|e| panic!("{what}: {e}"))}),
            k => panic!("{what}: unknown kind {k}"),
        };
        check_fields(&what, &got, d);
    }
}
