//! Opening files the page hands over: the File API source, the chunk index read as the
//! request says, and the session opened in place of the previous one.

use super::*;

/// The acquisition `files` (File objects) hold, described as `req` asks (metadata only,
/// read through the page's pool), with the rounds its metadata reads took.
pub(super) async fn acquisition_of(
    inner: &Inner,
    files: js_sys::Array,
    req: &OpenRequest,
) -> Result<(Acquisition, usize), JsValue> {
    let pool = match req.reads.as_deref() {
        None | Some("workers") => inner.read_ranges.clone(),
        Some("blob") => None,
        Some(other) => {
            return Err(js_err(format!(
                "open option reads: '{other}' is not \"workers\" or \"blob\""
            )))
        }
    };
    // Reads without the pool are walked without it too.
    let walker = pool.as_ref().and(inner.walk_pieces.clone());
    let mut sources: Vec<Arc<dyn ByteSource>> = Vec::new();
    for f in files.iter() {
        let file: web_sys::File = f
            .dyn_into()
            .map_err(|_| js_err("open() takes File objects"))?;
        sources.push(Arc::new(
            BlobSource::new(file, pool.clone(), walker.clone()).map_err(js_err)?,
        ));
    }
    if let Some(dims) = req.synthetic {
        return Ok((crate::formats::synthetic::open(dims).map_err(js_err)?, 0));
    }
    let opts = OpenOptions {
        scan_shape: req.scan_shape,
        dataset: req.dataset.clone(),
    };
    // The B-tree leaves are read by the upload, alongside the chunks before them, unless
    // the open is asked to read them.
    let defer = req.leaf_reads().map_err(js_err)? != LeafReads::Open;
    let (acq, rounds) = Acquisition::open_gathered(sources, &opts, defer).await;
    Ok((acq.map_err(js_err)?, rounds))
}

/// What the page learns of an opened session: `{info, profile, bfFit, bfFitWarning}`.
pub(super) fn opened_json(session: &Session) -> serde_json::Value {
    json!({
        "info": session.info,
        "profile": session.profile,
        "bfFit": session.bf_fit,
        "bfFitWarning": session.bf_fit_warning,
    })
}

/// The progress callback of an open, as the engine reports it.
pub(super) fn reporter(progress: &js_sys::Function) -> impl FnMut(&str, u64, u64) + '_ {
    move |stage: &str, done: u64, total: u64| {
        let _ = progress.call3(
            &JsValue::NULL,
            &stage.into(),
            &JsValue::from(done as f64),
            &JsValue::from(total as f64),
        );
    }
}

/// The open of [`Viewer::open`], its old session set aside (and the compare grid's others
/// with it: they shared its detector).
pub(super) async fn open_files(
    inner: &Inner,
    files: js_sys::Array,
    req: OpenRequest,
    progress: js_sys::Function,
) -> Result<JsValue, JsValue> {
    let t0 = now_ms();
    let read0 = blob_source::read_ms();
    let taken0 = crate::source::in_flight::reads_taken_in_flight();
    let pass0 = crate::products::stream::PASS_TIMES.ms();
    let (acq, index_rounds) = acquisition_of(inner, files, &req).await?;
    let mut report = reporter(&progress);
    // The previous acquisition stays open until this one is checked and about to load; its
    // GPU memory is then released, but for its resident buffers: this one reuses those its
    // plan can.
    let mut release_previous = || {
        if let Some(old) = inner.session.borrow_mut().take() {
            old.set_aside(&inner.engine);
        }
        compare::close(inner);
    };
    let mut session = Session::open_replacing(
        &inner.engine,
        acq,
        &req,
        now_ms() - t0,
        &mut report,
        &mut release_previous,
    )
    .await
    .map_err(js_err)?;
    session.profile.index_read_rounds = index_rounds;
    session.profile.reads_taken_in_flight =
        crate::source::in_flight::reads_taken_in_flight() - taken0;
    session.profile.stages.push(Stage {
        name: "of which file reads".into(),
        ms: blob_source::read_ms() - read0,
    });
    // A streamed open: its passes' block uploads (and each of their laps) and products.
    for (step, ms) in crate::products::stream::PASS_TIMES.since(&pass0) {
        session.profile.stages.push(Stage {
            name: format!("of which in passes: {step}"),
            ms,
        });
    }
    let out = opened_json(&session);
    inner.put(session);
    Ok(out.to_string().into())
}
