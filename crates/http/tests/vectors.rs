//! docs/http-vectors.json against our encoders and decoders, both ways:
//! every valid vector decodes to its fields and encodes back to its bytes;
//! every invalid one is refused with the error it names.

use serde_json::Value;
use shmlink_http::wire::{Request, Response};

fn doc() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/http-vectors.json");
    let text = std::fs::read_to_string(path).expect("docs/http-vectors.json");
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn hex(v: &Value) -> Vec<u8> {
    let s = v["hex"].as_str().expect("hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn text(v: &Value) -> String {
    v.as_str().expect("a string").to_string()
}

fn headers(v: &Value) -> Vec<(String, Vec<u8>)> {
    v.as_array()
        .expect("headers")
        .iter()
        .map(|h| (text(&h[0]), text(&h[1]).into_bytes()))
        .collect()
}

fn array<'a>(doc: &'a Value, key: &str) -> &'a Vec<Value> {
    let a = doc[key].as_array().expect(key);
    assert!(!a.is_empty(), "{key} has no vectors");
    a
}

#[test]
fn requests_decode_to_their_fields_and_encode_to_their_bytes() {
    let doc = doc();
    for v in array(&doc, "requests") {
        let d = &v["decoded"];
        let want = Request {
            method: text(&d["method"]),
            target: text(&d["target"]),
            protocol: text(&d["protocol"]),
            remote: text(&d["remote"]),
            headers: headers(&d["headers"]),
            body: text(&d["body"]).into_bytes(),
        };
        let bytes = hex(v);
        assert_eq!(
            Request::decode(&bytes).expect("valid"),
            want,
            "{}",
            v["name"]
        );
        assert_eq!(want.encode(), bytes, "{}", v["name"]);
    }
}

#[test]
fn responses_decode_to_their_fields_and_encode_to_their_bytes() {
    let doc = doc();
    for v in array(&doc, "responses") {
        let d = &v["decoded"];
        let want = Response {
            status: d["status"].as_u64().expect("status") as u16,
            headers: headers(&d["headers"]),
            body: text(&d["body"]).into_bytes(),
        };
        let bytes = hex(v);
        assert_eq!(
            Response::decode(&bytes).expect("valid"),
            want,
            "{}",
            v["name"]
        );
        let mut out = Vec::new();
        want.encode_into(&mut out);
        assert_eq!(out, bytes, "{}", v["name"]);
    }
}

#[test]
fn invalid_vectors_are_refused_with_their_error() {
    let doc = doc();
    for (key, decode) in [
        (
            "invalid_requests",
            (|b: &[u8]| Request::decode(b).map(|_| ())) as fn(&[u8]) -> _,
        ),
        ("invalid_responses", |b: &[u8]| {
            Response::decode(b).map(|_| ())
        }),
    ] {
        for v in array(&doc, key) {
            let e = decode(&hex(v)).expect_err(v["name"].as_str().expect("name"));
            let want = v["error_contains"].as_str().expect("error_contains");
            assert!(e.0.contains(want), "{}: {e} lacks {want:?}", v["name"]);
        }
    }
}

#[test]
fn handed_values_decode_to_their_fields_and_encode_to_their_text() {
    use shmlink_http::Handed;
    use std::time::Duration;
    let doc = doc();
    for v in array(&doc, "handed") {
        let d = &v["decoded"];
        let n = |k: &str| d[k].as_u64().expect(k);
        let fds = |k: &str| -> Vec<i32> {
            d[k].as_array()
                .map(|a| a.iter().map(|x| x.as_i64().expect("fd") as i32).collect())
                .unwrap_or_default()
        };
        let counters = fds("counters");
        let want = Handed {
            listeners: fds("listeners"),
            counters: (!counters.is_empty()).then(|| (counters[0], counters[1] as usize)),
            access_log: d["access_log"].as_i64().map(|x| x as i32),
            max_body: n("max_body") as usize,
            max_header_bytes: n("max_header_bytes") as usize,
            header_timeout: Duration::from_millis(n("header_timeout_ms")),
            send_timeout: d["send_timeout_ms"]
                .as_u64()
                .map_or(Duration::from_secs(60), Duration::from_millis),
            max_connections: n("max_connections") as usize,
            queue_timeout: Duration::from_millis(n("queue_timeout_ms")),
            root: d["root"].as_str().map(Into::into),
            spool_over: d["spool_over"].as_u64().map_or(usize::MAX, |n| n as usize),
            spool_dir: d["spool_dir"].as_str().map(Into::into),
            sendfile: d["sendfile"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|p| p.as_str().expect("a path").into())
                        .collect()
                })
                .unwrap_or_default(),
        };
        let value = v["value"].as_str().expect("value");
        assert_eq!(Handed::decode(value).expect("valid"), want, "{}", v["name"]);
        assert_eq!(want.encode(), value, "{}", v["name"]);
    }
    for v in array(&doc, "invalid_handed") {
        let e = Handed::decode(v["value"].as_str().expect("value"))
            .expect_err(v["name"].as_str().expect("name"))
            .to_string();
        let want = v["error_contains"].as_str().expect("error_contains");
        assert!(e.contains(want), "{}: {e} lacks {want:?}", v["name"]);
    }
}

#[test]
fn a_counters_page_starts_with_its_header() {
    use std::io::Read;
    let doc = doc();
    let v = &doc["counters_page"];
    let slots = v["slots"].as_u64().expect("slots") as usize;
    let (fd, page) = shmlink_http::CountersPage::create(slots).expect("page");
    assert_eq!(page.slots(), slots);
    let mut f = std::fs::File::from(fd);
    assert_eq!(
        f.metadata().expect("size").len(),
        v["len"].as_u64().expect("len")
    );
    let mut head = [0u8; 16];
    f.read_exact(&mut head).expect("read the header");
    assert_eq!(
        head.to_vec(),
        hex(&serde_json::json!({"hex": v["header_hex"]}))
    );
}
