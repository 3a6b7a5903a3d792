//! What the endpoint answers to one request: `GET` or `HEAD` of `/metrics`, of `/`
//! (the list of pages) and of each extra [`Route`]; 404 for other paths and 405 for
//! other methods. Every answer is a complete body with its length; hyper leaves the
//! body out of an answer to `HEAD`.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::prometheus_text;

use crate::{Registry, Route, render};

/// What the endpoint answers with.
pub(crate) struct Served {
    pub(crate) registry: std::sync::Arc<Registry>,
    pub(crate) routes: Vec<Route>,
}

/// The answer to `request`.
pub(crate) fn answer<B>(served: &Served, request: &Request<B>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        let mut r = respond(StatusCode::METHOD_NOT_ALLOWED, "text/plain", String::new());
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    match request.uri().path() {
        "/metrics" => respond(
            StatusCode::OK,
            prometheus_text::CONTENT_TYPE,
            render(&served.registry),
        ),
        "/" => {
            let mut body = String::from("rexec market metrics: GET /metrics\n");
            for r in &served.routes {
                body.push_str(&format!("also: GET {}\n", r.path));
            }
            respond(StatusCode::OK, "text/plain; charset=utf-8", body)
        }
        path => match served.routes.iter().find(|r| r.path == path) {
            Some(r) => respond(StatusCode::OK, r.content_type, (r.render)()),
            None => respond(
                StatusCode::NOT_FOUND,
                "text/plain",
                "only /metrics is served (and what GET / lists)\n".to_string(),
            ),
        },
    }
}

fn respond(status: StatusCode, kind: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn ask(served: &Served, method: Method, uri: &str) -> Response<Full<Bytes>> {
        let request = Request::builder().method(method).uri(uri).body(()).unwrap();
        answer(served, &request)
    }

    #[test]
    fn requests_are_told_apart() {
        let served = Served {
            registry: Arc::new(Registry::default()),
            routes: vec![Route {
                path: "/page",
                content_type: "text/html; charset=utf-8",
                render: Arc::new(|| "<p>hello</p>".to_string()),
            }],
        };
        let kind = |r: &Response<_>| r.headers()[CONTENT_TYPE].to_str().unwrap().to_string();
        let r = ask(&served, Method::GET, "/metrics?x=1");
        assert_eq!(r.status(), StatusCode::OK);
        assert!(kind(&r).contains("version=0.0.4"));
        let r = ask(&served, Method::HEAD, "/metrics");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(ask(&served, Method::GET, "/").status(), StatusCode::OK);
        let r = ask(&served, Method::GET, "/page?refresh=1");
        assert_eq!(kind(&r), "text/html; charset=utf-8");
        let r = ask(&served, Method::GET, "/etc/passwd");
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = ask(&served, Method::POST, "/metrics");
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
    }
}
