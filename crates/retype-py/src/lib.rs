//! `retype._native`: the laboratory's runs for the Python package `retype`
//! (python/retype), which turns what these return into dicts and DataFrames.
//!
//! Metrics cross as the command line's JSON text, so that the keys are the
//! command line's by construction; series, trace events, RSS samples and
//! mapping calls cross as NumPy arrays that take over the Rust vectors (no
//! Python object per event).
//! Every run releases the GIL.

use std::path::PathBuf;

use numpy::{Element, IntoPyArray, PyArray1};
use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use retype::api::Column;
use retype::api::{self, Study};
use retype_trace::{MapOp, Op};

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

/// What [`read_trace`] returns: the events as columns, the op names their
/// `op` indexes, the JSON text of `retype trace info --json`, the RSS samples
/// as columns, and the mapping calls as columns with the op names their `op`
/// indexes.
type TraceColumns<'py> = (
    Bound<'py, PyDict>,
    Vec<&'static str>,
    String,
    Bound<'py, PyDict>,
    Bound<'py, PyDict>,
    Vec<&'static str>,
);

/// A trace's events, RSS samples and mapping calls as columns, in file
/// order, and its summary ([`TraceColumns`]).
#[pyfunction]
fn read_trace(py: Python<'_>, path: PathBuf) -> PyResult<TraceColumns<'_>> {
    let (trace, info) = py.detach(|| api::trace(&path)).map_err(error)?;
    let e = &trace.events;
    let events = PyDict::new(py);
    // Op codes start at 1 (`Op::from_code`): index 0 is `Op::ALL[0]`.
    column(&events, "op", e, |e| e.op as u8 - 1)?;
    column(&events, "thread", e, |e| e.thread)?;
    column(&events, "time_ns", e, |e| e.time_ns)?;
    column(&events, "latency_ns", e, |e| e.latency_ns)?;
    column(&events, "size", e, |e| e.size)?;
    column(&events, "align", e, |e| e.align)?;
    column(&events, "ptr", e, |e| e.ptr)?;
    column(&events, "ret", e, |e| e.ret)?;
    column(&events, "descheduled", e, |e| e.descheduled)?;
    let op_names = Op::ALL.iter().map(|o| o.name()).collect();

    let r = &trace.rss;
    let rss = PyDict::new(py);
    column(&rss, "time_ns", r, |r| r.time_ns)?;
    column(&rss, "rss_bytes", r, |r| r.rss_bytes)?;
    column(&rss, "segment", r, |r| r.segment)?;

    let m = &trace.mappings;
    let mappings = PyDict::new(py);
    // As for events, from code 1 (`MapOp::from_code`) on.
    column(&mappings, "op", m, |m| m.op as u8 - 1)?;
    column(&mappings, "thread", m, |m| m.thread)?;
    column(&mappings, "time_ns", m, |m| m.time_ns)?;
    column(&mappings, "addr", m, |m| m.addr)?;
    column(&mappings, "len", m, |m| m.len)?;
    column(&mappings, "old_addr", m, |m| m.old_addr)?;
    column(&mappings, "old_len", m, |m| m.old_len)?;
    column(&mappings, "prot", m, |m| m.prot)?;
    column(&mappings, "flags", m, |m| m.flags)?;
    column(&mappings, "segment", m, |m| m.segment)?;
    let map_names = (1..).map_while(MapOp::from_code).map(MapOp::name);

    let info = info.to_string();
    Ok((events, op_names, info, rss, mappings, map_names.collect()))
}

/// Sets `d[name]` to the field `f` of each of `items`, as one NumPy array.
fn column<T, V: Element>(
    d: &Bound<'_, PyDict>,
    name: &str,
    items: &[T],
    f: impl Fn(&T) -> V,
) -> PyResult<()> {
    let v: Vec<V> = items.iter().map(f).collect();
    d.set_item(name, v.into_pyarray(d.py()))
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
