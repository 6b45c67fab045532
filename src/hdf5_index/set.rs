//! The HDF5 files of one acquisition opened together: external links resolved among them,
//! and how many bytes were asked of each.

use super::*;

/// Opened HDF5 files of one acquisition, shared by the link resolver.
#[derive(Clone)]
pub struct H5Set {
    pub(super) inner: Arc<H5SetInner>,
}

pub(super) struct H5SetInner {
    pub(super) files: FileSet,
    /// Leave chunk B-trees' leaves unread ([`DatasetIndex::pending`]).
    pub(super) defer_leaves: bool,
    pub(super) opened: Mutex<HashMap<String, Hdf5File>>,
    /// Link targets asked for, in order; tells which file a linked data set lives in and
    /// which linked file was missing.
    pub(super) requested: Mutex<Vec<String>>,
}

pub(super) struct Resolver(std::sync::Weak<H5SetInner>);

impl hdf5_reader::ExternalLinkResolver for Resolver {
    fn resolve_external_link(&self, filename: &str) -> H5Result<Option<Hdf5File>> {
        let Some(inner) = self.0.upgrade() else {
            return Ok(None);
        };
        let name = crate::source::base_name(filename).to_string();
        if let Ok(mut r) = inner.requested.lock() {
            r.push(name.clone());
        }
        let set = H5Set { inner };
        match set.open(&name) {
            Ok(f) => Ok(Some(f)),
            Err(Error::MissingFile { .. }) => Ok(None),
            Err(e) => Err(H5Error::InvalidData(e.to_string())),
        }
    }
}

impl H5Set {
    pub fn new(files: FileSet) -> Self {
        H5Set::with_leaves(files, false)
    }

    /// A set whose data sets' chunk B-trees are read down to their leaves' parents only
    /// (`defer_leaves`): the leaves are read later, by [`PendingLeaves::read`].
    pub fn with_leaves(files: FileSet, defer_leaves: bool) -> Self {
        H5Set {
            inner: Arc::new(H5SetInner {
                files,
                defer_leaves,
                opened: Mutex::new(HashMap::new()),
                requested: Mutex::new(Vec::new()),
            }),
        }
    }

    pub fn files(&self) -> &FileSet {
        &self.inner.files
    }

    pub fn source(&self, name: &str) -> Result<Arc<dyn ByteSource>> {
        self.inner
            .files
            .get(name)
            .ok_or_else(|| Error::MissingFile {
                missing: name.to_string(),
                referenced_by: "HDF5 external link".into(),
                also_missing: Vec::new(),
            })
    }

    /// Open (or reuse) an HDF5 file of the set.
    pub fn open(&self, name: &str) -> Result<Hdf5File> {
        if let Some(f) = self
            .inner
            .opened
            .lock()
            .ok()
            .and_then(|m| m.get(name).cloned())
        {
            return Ok(f);
        }
        let src = self.source(name)?;
        if src.is_empty() {
            return Err(Error::format(
                src.name(),
                "the file is empty (0 bytes): not an HDF5 file",
            ));
        }
        if !is_hdf5(src.as_ref())? {
            return Err(Error::format(
                src.name(),
                "not an HDF5 file (no HDF5 signature at offset 0, 512, 1024, ...)",
            ));
        }
        let opts = OpenOptions::default()
            .with_external_link_resolver(Arc::new(Resolver(Arc::downgrade(&self.inner))));
        let storage: Arc<dyn Storage> = Arc::new(SourceStorage::new(src.clone()));
        let file = Hdf5File::from_storage_with_options(storage, opts)
            .map_err(|e| h5_err(src.name(), "cannot open HDF5 file", e))?;
        if let Ok(mut m) = self.inner.opened.lock() {
            m.insert(name.to_string(), file.clone());
        }
        Ok(file)
    }

    /// Follow `path` in `file` (maybe through an external link) to a data set; returns the
    /// name of the file that holds it.
    pub fn dataset(&self, file: &str, path: &str) -> Result<(String, Dataset)> {
        let h5 = self.open(file)?;
        let before = self.link_requests();
        let found = h5.dataset(path);
        let linked = self.requested_since(before);
        match found {
            Ok(ds) => Ok((
                linked.last().cloned().unwrap_or_else(|| file.to_string()),
                ds,
            )),
            Err(e) => Err(self.blame(file, &format!("cannot read data set {path}"), before, e)),
        }
    }

    /// The error `e` of reading `what` in `file`, said where it arose: a link target asked for
    /// since `before` that was not given is the error; otherwise a failure while an external
    /// link was followed is the linked file's, not `file`'s.
    pub fn blame(&self, file: &str, what: &str, before: usize, e: H5Error) -> Error {
        let linked = self.requested_since(before);
        let mut missing = linked.iter().filter(|n| self.inner.files.get(n).is_none());
        if let Some(first) = missing.next() {
            return Error::MissingFile {
                missing: first.clone(),
                referenced_by: format!("{file}:{what}"),
                also_missing: missing.cloned().collect(),
            };
        }
        match linked.last() {
            Some(target) if target != file => {
                h5_err(target, &format!("{what} (linked from {file})"), e)
            }
            _ => h5_err(file, what, e),
        }
    }

    /// The names of the files opened so far (the primary, linked files, a companion).
    pub fn opened_names(&self) -> Vec<String> {
        self.inner
            .opened
            .lock()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// How many link targets have been asked for so far (the `before` of [`H5Set::blame`]).
    pub fn link_requests(&self) -> usize {
        self.inner.requested.lock().map(|r| r.len()).unwrap_or(0)
    }

    /// Link targets asked for so far that are not among the opened files, in order.
    pub(crate) fn missing_link_targets(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for n in self.requested_since(0) {
            if self.inner.files.get(&n).is_none() && !out.contains(&n) {
                out.push(n);
            }
        }
        out
    }

    pub(super) fn requested_since(&self, start: usize) -> Vec<String> {
        self.inner
            .requested
            .lock()
            .map(|r| r.get(start..).map(<[String]>::to_vec).unwrap_or_default())
            .unwrap_or_default()
    }
}
