//! `retype._native`: the laboratory's runs for the Python package `retype`
//! (python/retype), which turns what these return into dicts and DataFrames.
//!
//! Metrics cross as the command line's JSON text, so that the keys are the
//! command line's by construction; series and trace events cross as NumPy
//! arrays that take over the Rust vectors (no Python object per event).
//! Every run releases the GIL.

use std::path::PathBuf;

use numpy::{IntoPyArray, PyArray1};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use retype::api::Column;
use retype::api::{self, Study};
use retype_trace::Op;

create_exception!(
    _native,
    Error,
    PyValueError,
    "A bad workload, policy, trace or heap, with the command line's message."
);

/// An error of the laboratory as a Python exception, with the message the
/// command line prints after `retype: error: `.
fn error(e: anyhow::Error) -> PyErr {
    Error::new_err(format!("{e:#}"))
}

/// A study point as Python passes it: workload, policy, layout, arch.
type Point = (String, String, Option<String>, Option<String>);

fn parse(p: &Point) -> anyhow::Result<Study> {
    Study::parse(&p.0, &p.1, p.2.as_deref(), p.3.as_deref())
}

/// One study run: its JSON object as text, and with `series` the
/// per-request columns.
#[pyfunction]
#[pyo3(signature = (workload, policy, layout=None, arch=None, series=false))]
fn study<'py>(
    py: Python<'py>,
    workload: String,
    policy: String,
    layout: Option<String>,
    arch: Option<String>,
    series: bool,
) -> PyResult<(String, Option<Bound<'py, PyDict>>)> {
    let point = (workload, policy, layout, arch);
    let run = py.detach(|| parse(&point)?.run(series)).map_err(error)?;
    let columns = run.series.map(|s| columns(py, s)).transpose()?;
    Ok((run.metrics.to_string(), columns))
}

/// Every point parsed first (so that a bad one fails before any runs), then
/// run in order: the JSON text of each. A sweep's batch.
#[pyfunction]
fn study_many(py: Python<'_>, points: Vec<Point>) -> PyResult<Vec<String>> {
    py.detach(|| {
        let studies = points
            .iter()
            .map(|p| parse(p).map_err(|e| e.context(format!("{} under {}", p.0, p.1))))
            .collect::<anyhow::Result<Vec<_>>>()?;
        studies
            .iter()
            .map(|s| Ok(s.run(false)?.metrics.to_string()))
            .collect::<anyhow::Result<Vec<_>>>()
    })
    .map_err(error)
}

/// Parses a study point without running it (a sweep checks its grid so).
#[pyfunction]
#[pyo3(signature = (workload, policy, layout=None, arch=None))]
fn check_study(
    workload: String,
    policy: String,
    layout: Option<String>,
    arch: Option<String>,
) -> PyResult<()> {
    parse(&(workload, policy, layout, arch))
        .map(drop)
        .map_err(error)
}

/// The policies a `--policy` list names, one by one.
#[pyfunction]
fn policies(list: &str) -> PyResult<Vec<String>> {
    api::policies(list).map_err(error)
}

/// The heaps a `--heap` list names, one by one.
#[pyfunction]
fn heaps(list: &str) -> PyResult<Vec<String>> {
    api::heaps(list).map_err(error)
}

/// One replay of `trace` on `heap`: its JSON object as text.
#[pyfunction]
#[pyo3(signature = (trace, heap, min_time_ms=None))]
fn replay(
    py: Python<'_>,
    trace: PathBuf,
    heap: String,
    min_time_ms: Option<u64>,
) -> PyResult<String> {
    py.detach(|| api::replay(trace, &heap, min_time_ms))
        .map(|v| v.to_string())
        .map_err(error)
}

/// One numeric field of a trace event.
type EventField = fn(&retype_trace::Event) -> u64;

/// A trace's events as columns (`op` as indexes into the returned op names)
/// and the JSON text of `retype trace info --json`.
#[pyfunction]
fn read_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
) -> PyResult<(Bound<'py, PyDict>, Vec<&'static str>, String)> {
    let (trace, info) = py.detach(|| api::trace(&path)).map_err(error)?;
    let events = &trace.events;
    let d = PyDict::new(py);
    // Op codes start at 1 (`Op::from_code`): index 0 is `Op::ALL[0]`.
    let op: Vec<u8> = events.iter().map(|e| e.op as u8 - 1).collect();
    d.set_item("op", op.into_pyarray(py))?;
    let thread: Vec<u32> = events.iter().map(|e| e.thread).collect();
    d.set_item("thread", thread.into_pyarray(py))?;
    let fields: [(&str, EventField); 6] = [
        ("time_ns", |e| e.time_ns),
        ("latency_ns", |e| e.latency_ns),
        ("size", |e| e.size),
        ("align", |e| e.align),
        ("ptr", |e| e.ptr),
        ("ret", |e| e.ret),
    ];
    for (name, f) in fields {
        let v: Vec<u64> = events.iter().map(f).collect();
        d.set_item(name, v.into_pyarray(py))?;
    }
    let descheduled: Vec<bool> = events.iter().map(|e| e.descheduled).collect();
    d.set_item("descheduled", descheduled.into_pyarray(py))?;
    let names = Op::ALL.iter().map(|o| o.name()).collect();
    Ok((d, names, info.to_string()))
}

/// A run's series as a dict of NumPy arrays (outcomes as a list of str).
fn columns<'py>(py: Python<'py>, series: Vec<(&str, Column)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, c) in series {
        match c {
            Column::Counts(v) => {
                let a: Bound<'py, PyArray1<u64>> = v.into_pyarray(py);
                d.set_item(name, a)?;
            }
            Column::Outcomes(v) => d.set_item(name, PyList::new(py, v)?)?,
        }
    }
    Ok(d)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("Error", m.py().get_type::<Error>())?;
    m.add_function(wrap_pyfunction!(study, m)?)?;
    m.add_function(wrap_pyfunction!(study_many, m)?)?;
    m.add_function(wrap_pyfunction!(check_study, m)?)?;
    m.add_function(wrap_pyfunction!(policies, m)?)?;
    m.add_function(wrap_pyfunction!(heaps, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(read_trace, m)?)?;
    Ok(())
}
