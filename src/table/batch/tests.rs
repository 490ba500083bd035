//! Goldens: kube-apiserver's `TestPrintJob` and `TestPrintJobList`
//! (`pkg/printers/internalversion/printers_test.go`), every case, in JSON;
//! cron jobs from `printCronJob` itself (printers.go), which that file does
//! not test.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

/// The tests' `time.Now()`.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000)
}

/// `now` moved by `secs` (may be negative), as RFC 3339.
fn at(secs: f64) -> String {
    let t = if secs >= 0.0 {
        now() + Duration::from_secs_f64(secs)
    } else {
        now() - Duration::from_secs_f64(-secs)
    };
    humantime::format_rfc3339(t).to_string()
}

fn job(o: Value) -> Vec<String> {
    job_row(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(now())
}

fn template() -> Value {
    json!({"spec": {"containers": [
        {"name": "fake-job-container1", "image": "fake-job-image1"},
        {"name": "fake-job-container2", "image": "fake-job-image2"}]}})
}

const TEN_YEARS: f64 = 10.0 * 365.0 * 86_400.0;

#[test]
fn should_print_jobs_as_the_apiservers_tests_do() {
    let soon = at(1.9);
    let meta = |name: &str, created: &str| json!({"name": name, "creationTimestamp": created});
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"metadata": meta("job1", &soon),
                   "spec": {"completions": 2, "template": template(),
                            "selector": {"matchLabels": {"job-label": "job-label-value"}}},
                   "status": {"succeeded": 1}}),
            vec![
                "job1",
                "Running",
                "1/2",
                "",
                "0s",
                "fake-job-container1,fake-job-container2",
                "fake-job-image1,fake-job-image2",
                "job-label=job-label-value",
            ],
        ),
        (
            // `AddDate(-10, 0, 0)`: ten years and their leap days.
            json!({"metadata": meta("job2", &at(-(TEN_YEARS + 2.0 * 86_400.0))),
                   "status": {"succeeded": 0}}),
            vec!["job2", "Running", "0/1", "", "10y", "", "", "<none>"],
        ),
        (
            json!({"metadata": meta("job3", &at(-TEN_YEARS)),
                   "status": {"startTime": at(60.0), "completionTime": at(31.0 * 60.0)}}),
            vec!["job3", "Running", "0/1", "30m", "10y", "", "", "<none>"],
        ),
        (
            json!({"metadata": meta("job4", &at(-TEN_YEARS)),
                   "status": {"startTime": at(-20.0 * 60.0)}}),
            vec!["job4", "Running", "0/1", "20m", "10y", "", "", "<none>"],
        ),
        (
            json!({"metadata": meta("job5", &soon),
                   "status": {"conditions": [{"type": "Complete", "status": "True"}]}}),
            vec!["job5", "Complete", "0/1", "", "0s", "", "", "<none>"],
        ),
        (
            json!({"metadata": meta("job6", &soon),
                   "status": {"conditions": [{"type": "Failed", "status": "True"}]}}),
            vec!["job6", "Failed", "0/1", "", "0s", "", "", "<none>"],
        ),
        (
            json!({"metadata": meta("job7", &soon),
                   "status": {"conditions": [{"type": "Suspended", "status": "True"}]}}),
            vec!["job7", "Suspended", "0/1", "", "0s", "", "", "<none>"],
        ),
        (
            json!({"metadata": meta("job8", &soon),
                   "status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}}),
            vec!["job8", "FailureTarget", "0/1", "", "0s", "", "", "<none>"],
        ),
        (
            json!({"metadata": {"name": "job9", "creationTimestamp": soon, "deletionTimestamp": soon}}),
            vec!["job9", "Terminating", "0/1", "", "0s", "", "", "<none>"],
        ),
        // TestPrintJobList's second job: running for 20 minutes.
        (
            json!({"metadata": meta("job2", &soon),
                   "spec": {"completions": 2, "template": template()},
                   "status": {"succeeded": 2, "startTime": at(-20.0 * 60.0)}}),
            vec![
                "job2",
                "Running",
                "2/2",
                "20m",
                "0s",
                "fake-job-container1,fake-job-container2",
                "fake-job-image1,fake-job-image2",
                "<none>",
            ],
        ),
    ];
    for (o, want) in cases {
        assert_eq!(job(o), want);
    }
}

/// `printJob`'s other branches: parallel jobs without completions, and a
/// condition that is not `True`.
#[test]
fn should_count_parallel_jobs_and_read_only_true_conditions() {
    let o = json!({"metadata": {"name": "p"}, "spec": {"parallelism": 3},
                   "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "False"}]}});
    assert_eq!(job(o)[1..3], ["Running", "1/1 of 3"]);
}

#[test]
fn should_print_cron_jobs_as_print_cron_job_does() {
    let o = json!({
        "metadata": {"name": "nightly", "creationTimestamp": at(-3.0 * 3600.0)},
        "spec": {"schedule": "0 2 * * *", "timeZone": "Europe/Paris", "suspend": false,
                 "jobTemplate": {"spec": {"template": template(),
                     "selector": {"matchLabels": {"app": "backup"}}}}},
        "status": {"active": [{"kind": "Job", "name": "nightly-1"}], "lastScheduleTime": at(-125.0)}
    });
    let row = cron_job_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now()),
        [
            "nightly",
            "0 2 * * *",
            "Europe/Paris",
            "False",
            "1",
            "2m5s",
            "3h",
            "fake-job-container1,fake-job-container2",
            "fake-job-image1,fake-job-image2",
            "app=backup",
        ]
    );
    assert_eq!(row.cells[4], Cell::Int(1), "Active is an int64");
    let bare = cron_job_row(br#"{"metadata":{"name":"c"},"spec":{"schedule":"@hourly"}}"#).unwrap();
    assert_eq!(
        bare.texts(now()),
        [
            "c",
            "@hourly",
            "<none>",
            "<unset>",
            "0",
            "<none>",
            "<unknown>",
            "",
            "",
            "<none>"
        ]
    );
}
