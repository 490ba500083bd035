//! Log lines, to standard error: text for people, or (`log.format = "json"`)
//! one JSON object per line with the field names of kube components' JSON
//! logs (`--logging-format=json`), which log pipelines already parse:
//! `ts` (milliseconds since the epoch), `caller` (`dir/file.rs:line`),
//! `msg`, `v` (the verbosity: 0 for info and warnings, 4 for debug, 6 for
//! trace; none on errors), then the event's fields, an `error` field named
//! `err` as kube names it.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::config::LogFormat;

/// Sets the process's logger: `level` a tracing filter (`RUST_LOG` wins).
pub fn init(level: &str, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .or_else(|_| tracing_subscriber::EnvFilter::try_new(level))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder.event_format(KubeJson).init(),
    }
}

/// kube's JSON log line.
pub struct KubeJson;

impl<S, N> FormatEvent<S, N> for KubeJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        writer.write_str(&line(event, SystemTime::now()))?;
        writer.write_char('\n')
    }
}

/// The event as one JSON object (no newline).
fn line(event: &Event<'_>, now: SystemTime) -> String {
    let meta = event.metadata();
    let millis = now
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_nanos() as f64 / 1e6);
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut obj = serde_json::Map::new();
    obj.insert("ts".into(), serde_json::json!(millis));
    if let (Some(file), Some(n)) = (meta.file(), meta.line()) {
        obj.insert("caller".into(), format!("{}:{n}", short(file)).into());
    }
    obj.insert("msg".into(), fields.message.unwrap_or_default().into());
    let level = *meta.level();
    if level != Level::ERROR {
        let v = match level {
            Level::DEBUG => 4,
            Level::TRACE => 6,
            _ => 0,
        };
        obj.insert("v".into(), v.into());
    }
    for (k, v) in fields.rest {
        let k = if k == "error" { "err".to_string() } else { k };
        obj.insert(k, v);
    }
    serde_json::Value::Object(obj).to_string()
}

/// `src/serve/mod.rs` → `serve/mod.rs`, as zap's short caller writes it.
fn short(file: &str) -> &str {
    let mut slashes = file.rmatch_indices('/');
    match (slashes.next(), slashes.next()) {
        (Some(_), Some((i, _))) => &file[i + 1..],
        _ => file,
    }
}

/// An event's message and fields, in the order written.
#[derive(Default)]
struct Fields {
    message: Option<String>,
    rest: Vec<(String, serde_json::Value)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}").into());
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: serde_json::Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.rest.push((field.name().to_string(), value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Lines written by a subscriber with [`KubeJson`], caught.
    #[derive(Clone, Default)]
    struct Caught(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Caught {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn should_write_kube_components_json_fields() {
        let caught = Caught::default();
        let out = caught.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .event_format(KubeJson)
            .with_writer(move || out.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            tracing::info!(resource = "pods", count = 3_u64, "cache synced");
            tracing::error!(error = %"disk full", path = "/x", "cannot write");
            tracing::debug!(ok = true, "detail");
        });
        let text = String::from_utf8(caught.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(
            keys(&lines[0]),
            ["ts", "caller", "msg", "v", "resource", "count"]
        );
        assert_eq!(lines[0]["msg"], "cache synced");
        assert_eq!(lines[0]["v"], 0);
        assert_eq!(lines[0]["count"], 3);
        assert!(lines[0]["ts"].as_f64().unwrap() > 1.7e12, "milliseconds");
        assert!(
            lines[0]["caller"]
                .as_str()
                .unwrap()
                .starts_with("src/logging.rs:"),
            "{}",
            lines[0]["caller"]
        );
        assert_eq!(keys(&lines[1]), ["ts", "caller", "msg", "err", "path"]);
        assert_eq!(lines[1]["err"], "disk full");
        assert_eq!(lines[2]["v"], 4);
        assert_eq!(lines[2]["ok"], true);
        assert_eq!(short("/a/b/c.rs"), "b/c.rs");
        assert_eq!(short("c.rs"), "c.rs");
    }
}
