//! `web_fetch`: GET (or HEAD) one URL over openmax's own HTTP stack (hyper, rustls with the
//! webpki roots), not from inside the agent's sandbox, and return what it says as text the
//! model can read, marked as untrusted.
//!
//! - **Policy** ([`policy`]): `[tools.web_fetch] deny` refuses a host at inspection; a host
//!   not in `allow` makes the plan ask to confirm it (`ToolPlan::confirm`: a `gate` approval
//!   in `ask` and `readonly`, once per host and session; nothing asks in `auto`).
//! - **Addresses** ([`address`]): private, loopback, link-local and other internal addresses
//!   are refused unless the host is in `allow_private`, for IP literals at inspection and for
//!   names after resolving them (every resolved address is checked and only checked ones are
//!   connected to).
//! - **Redirects**: followed up to `max_redirects` while they stay on the first host or go to
//!   a host in `allow`; a redirect to any other host ends the call with the new URL, which the
//!   model can fetch (and so be asked about) itself. Each hop is checked as the first.
//! - **Caps**: the body is read up to `max_bytes` (the rest is cut and said so), the whole
//!   fetch runs under `timeout_s`, `cancel` stops it at once; the text shown is cut at the
//!   tool output cap, and `offset` pages through the rest.
//! - **Content** ([`content`]): HTML is converted to Markdown, text and JSON pass as they
//!   are, anything else is summarised; the result is wrapped as untrusted web content.

pub mod address;
pub mod content;
pub mod policy;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, LOCATION, USER_AGENT};
use hyper::{Method, Request, Uri};
use hyper_rustls::HttpsConnectorBuilder;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::sync::oneshot;

use super::args::Args;
use super::{fail, invalid_plan, ToolContext, ToolOutcome, ToolPlan};
use address::CheckedResolver;
use policy::HostVerdict;

/// The tool's name.
pub const NAME: &str = "web_fetch";

const ARGS: [&str; 3] = ["url", "method", "offset"];

/// A call's checked arguments.
struct Call {
    url: Uri,
    head: bool,
    offset: usize,
}

fn parse(args: &Value) -> Result<Call, String> {
    let a = Args::new(NAME, args, &ARGS)?;
    let raw = a.string("url")?;
    let url = checked_url(raw)?;
    let head = match a.opt_string("method")? {
        None => false,
        Some(m) if m.eq_ignore_ascii_case("GET") => false,
        Some(m) if m.eq_ignore_ascii_case("HEAD") => true,
        Some(m) => return Err(format!("{NAME}: method must be GET or HEAD, not {m:?}")),
    };
    let offset = a.opt_positive("offset")?.unwrap_or(0) as usize;
    Ok(Call { url, head, offset })
}

/// `raw` as an absolute http(s) URL with a host.
fn checked_url(raw: &str) -> Result<Uri, String> {
    let lower = raw.trim().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) {
        return Err(format!(
            "{NAME}: {raw:?}: only http:// and https:// URLs can be fetched"
        ));
    }
    let url: Uri = raw
        .trim()
        .parse()
        .map_err(|e| format!("{NAME}: {raw:?} is not a URL: {e}"))?;
    match url.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            return Err(format!(
                "{NAME}: {raw:?}: only http:// and https:// URLs can be fetched"
            ))
        }
    }
    if url.host().is_none_or(str::is_empty) {
        return Err(format!("{NAME}: {raw:?} names no host"));
    }
    Ok(url)
}

fn host_of(url: &Uri) -> String {
    policy::normal(url.host().unwrap_or(""))
}

/// Why `url`'s host may not be fetched at all: denied, or an internal IP literal the user did
/// not allow.
fn refused(ctx: &ToolContext, url: &Uri) -> Option<String> {
    let host = host_of(url);
    if let HostVerdict::Denied(rule) = ctx.web.verdict(&host) {
        return Some(format!(
            "{NAME}: refused: the host {host} is denied by [tools.web_fetch] deny ({rule:?})"
        ));
    }
    let ip: std::net::IpAddr = host.parse().ok()?;
    let why = address::forbidden(ip)?;
    (!ctx.web.private_allowed(&host)).then(|| address::refusal(&host, None, why))
}

/// Inspect a call: refuse what can never be fetched; ask to confirm a host not allowed.
pub fn plan(ctx: &ToolContext, args: &Value) -> ToolPlan {
    let call = match parse(args) {
        Ok(c) => c,
        Err(e) => return invalid_plan(false, e),
    };
    if let Some(why) = refused(ctx, &call.url) {
        return invalid_plan(false, why);
    }
    let host = host_of(&call.url);
    let url = call.url.to_string();
    let method = if call.head { "HEAD" } else { "GET" };
    let mut detail = format!(
        "{method} {url}\nopenmax fetches it itself, outside the sandbox, and gives the model the \
         text (marked as untrusted)."
    );
    let confirm = match ctx.web.verdict(&host) {
        HostVerdict::Allowed | HostVerdict::Denied(_) => None,
        HostVerdict::Ask => {
            detail.push_str(&format!(
                "\nThe host {host} is not in [tools.web_fetch] allow: approving lets this \
                 session fetch from {host} without asking again."
            ));
            Some(format!("{NAME} host {host}"))
        }
    };
    ToolPlan {
        mutating: false,
        targets: vec![host, url.clone()],
        summary: format!("fetch {url}"),
        detail,
        source: None,
        invalid: None,
        sandbox: Default::default(),
        confirm,
    }
}

/// Fetch, under the time limit, until done or `cancel` fires.
pub async fn run(
    ctx: &ToolContext,
    args: &Value,
    mut cancel: oneshot::Receiver<()>,
) -> ToolOutcome {
    let call = match parse(args) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let limit = Duration::from_millis(ctx.web.timeout_ms.max(1));
    tokio::select! {
        biased;
        Ok(()) = &mut cancel => fail(format!("{NAME}: cancelled")),
        r = tokio::time::timeout(limit, fetch(ctx, &call)) => match r {
            Ok(outcome) => outcome,
            Err(_) => fail(format!(
                "{NAME}: {}: timed out after {} s (the [tools.web_fetch] timeout_s limit)",
                call.url,
                ctx.web.timeout_ms as f64 / 1000.0
            )),
        },
    }
}

type FetchClient =
    Client<hyper_rustls::HttpsConnector<HttpConnector<CheckedResolver>>, Empty<Bytes>>;

fn client(resolver: CheckedResolver) -> FetchClient {
    let mut http = HttpConnector::new_with_resolver(resolver);
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http()
        .enable_http1()
        .wrap_connector(http);
    Client::builder(TokioExecutor::new()).build(https)
}

async fn fetch(ctx: &ToolContext, call: &Call) -> ToolOutcome {
    let first_host = host_of(&call.url);
    let mut url = call.url.clone();
    let mut method = if call.head { Method::HEAD } else { Method::GET };
    let mut hops: Vec<String> = Vec::new();
    let resp = loop {
        if let Some(why) = refused(ctx, &url) {
            return fail(with_hops(why, &hops));
        }
        let host = host_of(&url);
        if host != first_host && ctx.web.verdict(&host) != HostVerdict::Allowed {
            let mut out = format!(
                "{NAME}: {} redirects to {url}, on another host ({host}), which is not in \
                 [tools.web_fetch] allow; it was not fetched. Call {NAME} with that URL to \
                 fetch it.",
                hops.last().map(String::as_str).unwrap_or(""),
            );
            out = with_hops(out, &hops);
            return ToolOutcome {
                ok: true,
                output: out,
                diffs: Vec::new(),
                images: Vec::new(),
            };
        }
        let refusal = Arc::new(Mutex::new(None));
        let resolver = CheckedResolver {
            allow_private: ctx.web.private_allowed(&host),
            refusal: refusal.clone(),
        };
        let req = Request::builder()
            .method(method.clone())
            .uri(url.clone())
            .header(USER_AGENT, concat!("openmax/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
            .header(
                ACCEPT,
                "text/markdown, text/html;q=0.9, text/plain;q=0.8, application/json;q=0.8, */*;q=0.5",
            )
            .body(Empty::<Bytes>::new());
        let req = match req {
            Ok(r) => r,
            Err(e) => return fail(format!("{NAME}: {url}: {e}")),
        };
        let resp = match client(resolver).request(req).await {
            Ok(r) => r,
            Err(e) => {
                let said = refusal.lock().ok().and_then(|s| s.clone());
                return fail(with_hops(
                    said.unwrap_or_else(|| {
                        format!(
                            "{NAME}: could not fetch {url}: {}",
                            crate::provider::http::error_chain(&e)
                        )
                    }),
                    &hops,
                ));
            }
        };
        let status = resp.status();
        let location = resp
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        match (status.is_redirection(), location) {
            (true, Some(loc)) if status.as_u16() != 304 => {
                if hops.len() as u32 >= ctx.web.max_redirects {
                    return fail(with_hops(
                        format!(
                            "{NAME}: stopped after {} redirects (the [tools.web_fetch] \
                             max_redirects limit); the last pointed at {loc}",
                            hops.len()
                        ),
                        &hops,
                    ));
                }
                let next = match content::resolve_location(&url, &loc) {
                    Ok(n) => n,
                    Err(e) => return fail(with_hops(format!("{NAME}: {e}"), &hops)),
                };
                hops.push(format!("{url} → {} {next}", status.as_u16()));
                if status.as_u16() == 303 {
                    method = if call.head { Method::HEAD } else { Method::GET };
                }
                url = match checked_url(&next.to_string()) {
                    Ok(u) => u,
                    Err(e) => return fail(with_hops(e, &hops)),
                };
            }
            _ => break resp,
        }
    };
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let declared = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut head = format!(
        "{} {url} → {} {}",
        if call.head { "HEAD" } else { "GET" },
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    )
    .trim_end()
    .to_string();
    if call.head {
        let mut out = with_hops(head, &hops);
        for (k, v) in resp.headers() {
            out.push_str(&format!("\n{k}: {}", String::from_utf8_lossy(v.as_bytes())));
        }
        return ToolOutcome {
            ok: status.is_success(),
            output: out,
            diffs: Vec::new(),
            images: Vec::new(),
        };
    }
    let (body, cut) = match read_capped(resp.into_body(), ctx.web.max_bytes).await {
        Ok(b) => b,
        Err(e) => {
            return fail(with_hops(
                format!("{NAME}: {url}: the body broke off: {e}"),
                &hops,
            ))
        }
    };
    let (kind, text) = content::render(content_type.as_deref(), &body);
    head.push_str(&format!(
        " ({}, {} bytes{})",
        content_type.as_deref().unwrap_or("no content type"),
        body.len(),
        match kind {
            content::Kind::Markdown => ", converted to Markdown",
            content::Kind::Text | content::Kind::Summary => "",
        }
    ));
    let mut out = with_hops(head, &hops);
    if cut {
        out.push_str(&format!(
            "\n[the body was cut at {} bytes, the [tools.web_fetch] max_bytes cap{}]",
            ctx.web.max_bytes,
            declared
                .map(|d| format!("; the server announced {d} bytes"))
                .unwrap_or_default()
        ));
    }
    let total = text.chars().count();
    let shown: String = text.chars().skip(call.offset).collect();
    let shown = match shown
        .char_indices()
        .find(|(i, _)| *i >= ctx.output_cap_bytes)
    {
        Some((at, _)) => {
            let end = call.offset + shown[..at].chars().count();
            out.push_str(&format!(
                "\n[showing characters {}–{end} of {total}; call {NAME} again with offset {end} \
                 for more]",
                call.offset
            ));
            shown[..at].to_string()
        }
        None if call.offset > 0 => {
            out.push_str(&format!(
                "\n[showing characters {}–{total} of {total}]",
                call.offset.min(total)
            ));
            shown
        }
        None => shown,
    };
    out.push('\n');
    out.push_str(&content::untrusted(&url.to_string(), &shown));
    ToolOutcome {
        ok: status.is_success(),
        output: out,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

/// `text`, preceded by the redirects that led to it.
fn with_hops(text: String, hops: &[String]) -> String {
    if hops.is_empty() {
        return text;
    }
    let mut out = String::new();
    for h in hops {
        out.push_str(&format!("redirect: {h}\n"));
    }
    out.push_str(&text);
    out
}

/// The body up to `cap` bytes, and whether more followed.
async fn read_capped(
    mut body: hyper::body::Incoming,
    cap: u64,
) -> Result<(Vec<u8>, bool), hyper::Error> {
    let cap = usize::try_from(cap).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        if let Some(data) = frame.data_ref() {
            let room = cap - out.len();
            if data.len() > room {
                out.extend_from_slice(&data[..room]);
                return Ok((out, true));
            }
            out.extend_from_slice(data);
        }
    }
    Ok((out, false))
}
