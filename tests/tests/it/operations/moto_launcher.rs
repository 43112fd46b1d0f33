//! The moto launcher's `--keep-alive` mode (the benchmarks' server): several
//! requests answered on one connection, an unread request body drained
//! before the next request, and the default mode's one connection per request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use test_kit::Moto;

/// One answer read off the connection: (head, body).
fn read_answer(reader: &mut BufReader<TcpStream>) -> (String, String) {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line).expect("reading an answer");
        assert!(
            n > 0,
            "connection closed before an answer; head so far: {head:?}"
        );
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let lower = head.to_ascii_lowercase();
    if lower.contains("transfer-encoding: chunked") {
        let mut body = Vec::new();
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).expect("a chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("a hex chunk size");
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).expect("a chunk");
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
        return (head, String::from_utf8(body).expect("UTF-8 body"));
    }
    let length: usize = lower
        .lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse().expect("a length"))
        })
        .expect("answers carry Content-Length or are chunked");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("reading a body");
    (head, String::from_utf8(body).expect("UTF-8 body"))
}

fn send(stream: &mut TcpStream, method: &str, path: &str, headers: &[(&str, &str)], body: &str) {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream
        .write_all(request.as_bytes())
        .expect("sending a request");
}

const LIST_TABLES: [(&str, &str); 3] = [
    ("Content-Type", "application/x-amz-json-1.0"),
    ("X-Amz-Target", "DynamoDB_20120810.ListTables"),
    (
        "Authorization",
        "AWS4-HMAC-SHA256 Credential=test/20261201/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
    ),
];

fn connect(moto: &Moto) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(("127.0.0.1", moto.port())).expect("connecting to moto");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

#[test]
fn keep_alive_answers_several_requests_on_one_connection() {
    let moto = Moto::start(&["--keep-alive"]);
    let (mut stream, mut reader) = connect(&moto);
    // A body the launcher never reads (a latency setting): drained, not
    // taken for the next request line.
    send(
        &mut stream,
        "POST",
        "/_launcher/latency/0",
        &[],
        "unread body",
    );
    let (head, body) = read_answer(&mut reader);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, "ok");
    assert!(
        !head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    for _ in 0..3 {
        send(&mut stream, "POST", "/", &LIST_TABLES, "{}");
        let (head, body) = read_answer(&mut reader);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.contains("TableNames"), "{body}");
    }
    send(&mut stream, "GET", "/_launcher/counts", &[], "");
    let (_, counts) = read_answer(&mut reader);
    let counts: serde_json::Value = serde_json::from_str(&counts).unwrap();
    assert_eq!(counts["DynamoDB_20120810.ListTables"], 3, "{counts}");
}

#[test]
fn by_default_each_connection_serves_one_request() {
    let moto = Moto::start(&[]);
    let (mut stream, mut reader) = connect(&moto);
    send(&mut stream, "POST", "/", &LIST_TABLES, "{}");
    let (head, _) = read_answer(&mut reader);
    assert!(
        head.to_ascii_lowercase().contains("connection: close"),
        "{head}"
    );
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).expect("the server closes");
    assert!(rest.is_empty(), "nothing after the answer: {rest:?}");
}
