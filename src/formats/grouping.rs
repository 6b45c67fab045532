//! Several acquisitions among the files of one drop or folder (the page's compare grid): each
//! file goes with the acquisition its name says it belongs to, as the formats name their
//! files (an Arina master's `_data_NNNNNN` files and companion, a Merlin `.mib`'s `.hdr`, an
//! EMPAD `.raw`'s `.xml`). Names only: nothing is read, and the open of each acquisition
//! still checks what its files hold.

use serde::Serialize;

/// What a file is to the acquisitions among a set of files.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Role {
    /// The file an acquisition is opened from (an Arina master, an HDF5 file, a `.mib`, an
    /// EMPAD `.raw`, a prepared `.stem4d`), with the stem its companions share.
    Root(String),
    /// An Arina data file of the master `<stem>_master.h5`.
    Data(String),
    /// A Merlin `<stem>.hdr`.
    Header(String),
    /// An EMPAD `<stem>.xml`.
    Description(String),
    /// Neither (notes, images): left out when the files hold several acquisitions.
    Other,
}

/// The acquisitions among a set of files, as indices into the names given.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Groups {
    /// The files of each acquisition, its root first, in the order the roots were given.
    pub acquisitions: Vec<Vec<usize>>,
    /// Files that belong to none of them (said, never silently dropped).
    pub left_out: Vec<usize>,
}

fn lower_ext(name: &str) -> Option<(String, String)> {
    let (stem, ext) = name.rsplit_once('.')?;
    Some((stem.to_string(), ext.to_ascii_lowercase()))
}

/// `<stem>_data_<digits>` → `<stem>`.
fn data_stem(stem: &str) -> Option<&str> {
    let (prefix, number) = stem.rsplit_once("_data_")?;
    (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some(prefix)
}

const HDF5_EXTENSIONS: [&str; 6] = ["h5", "hdf5", "hdf", "emd", "nxs", "cxi"];

fn role(name: &str) -> Role {
    let Some((stem, ext)) = lower_ext(name) else {
        return Role::Other;
    };
    match ext.as_str() {
        "mib" | "raw" | "stem4d" => Role::Root(stem),
        "hdr" => Role::Header(stem),
        "xml" => Role::Description(stem),
        e if HDF5_EXTENSIONS.contains(&e) => match (stem.strip_suffix("_master"), data_stem(&stem))
        {
            (Some(master), _) => Role::Root(master.to_string()),
            (None, Some(of)) => Role::Data(of.to_string()),
            (None, None) => Role::Root(stem),
        },
        _ => Role::Other,
    }
}

/// Group `names` into acquisitions. Files that hold at most one acquisition stay one group,
/// as an open of them all takes them (its open says what it leaves out); otherwise each
/// root starts an acquisition and the other files join the one named as theirs: an Arina
/// master's data files and its companion `<stem>.h5` (which is no root beside a master), a
/// `.hdr` or `.xml` of the same stem, or of the only `.mib` or `.raw` given. A data file
/// whose master is not among them is an acquisition of its own (its open says what it
/// lacks).
pub fn acquisitions(names: &[&str]) -> Groups {
    let roles: Vec<Role> = names.iter().map(|n| role(n)).collect();
    let is_master = |n: &str| {
        lower_ext(n)
            .is_some_and(|(s, e)| HDF5_EXTENSIONS.contains(&e.as_str()) && s.ends_with("_master"))
    };
    let masters: Vec<String> = names
        .iter()
        .zip(&roles)
        .filter(|(n, _)| is_master(n))
        .filter_map(|(_, r)| match r {
            Role::Root(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    // An Arina companion `<stem>.h5` beside `<stem>_master.h5` belongs to the master (an
    // HDF5 file: `<stem>.stem4d` is an acquisition of its own).
    let hdf5 =
        |k: usize| lower_ext(names[k]).is_some_and(|(_, e)| HDF5_EXTENSIONS.contains(&e.as_str()));
    let companion = |k: usize| {
        !is_master(names[k]) && hdf5(k) && matches!(&roles[k], Role::Root(s) if masters.contains(s))
    };
    let data_of_master = |k: usize| matches!(&roles[k], Role::Data(s) if masters.contains(s));
    let roots: Vec<usize> = (0..names.len())
        .filter(|&k| match &roles[k] {
            Role::Root(_) => !companion(k),
            Role::Data(_) => !data_of_master(k),
            _ => false,
        })
        .collect();
    if roots.len() <= 1 {
        return Groups {
            acquisitions: vec![(0..names.len()).collect()],
            left_out: Vec::new(),
        };
    }
    let ext_of = |k: usize| lower_ext(names[k]).map(|(_, e)| e).unwrap_or_default();
    let stem_of = |k: usize| match &roles[k] {
        Role::Root(s) | Role::Data(s) => s.clone(),
        _ => String::new(),
    };
    let mut acquisitions: Vec<Vec<usize>> = roots.iter().map(|&r| vec![r]).collect();
    let mut left_out = Vec::new();
    // The root a companion joins: of its stem and the extension it describes, else the only
    // root with that extension.
    let root_for = |stem: &str, ext: &str, want_master: bool| -> Option<usize> {
        let fits = |r: usize| {
            if want_master {
                is_master(names[r])
            } else {
                ext_of(r) == ext
            }
        };
        let same: Vec<usize> = (0..roots.len())
            .filter(|&i| fits(roots[i]) && stem_of(roots[i]) == stem)
            .collect();
        if let [i] = same[..] {
            return Some(i);
        }
        let only: Vec<usize> = (0..roots.len()).filter(|&i| fits(roots[i])).collect();
        (same.is_empty() && only.len() == 1 && !want_master).then(|| only[0])
    };
    for (k, role) in roles.iter().enumerate() {
        if roots.contains(&k) {
            continue;
        }
        let joins = match role {
            Role::Root(s) | Role::Data(s) => root_for(s, "", true),
            Role::Header(s) => root_for(s, "mib", false),
            Role::Description(s) => root_for(s, "raw", false),
            Role::Other => None,
        };
        match joins {
            Some(i) => acquisitions[i].push(k),
            None => left_out.push(k),
        }
    }
    Groups {
        acquisitions,
        left_out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named<'a>(names: &[&'a str], g: &Groups) -> (Vec<Vec<&'a str>>, Vec<&'a str>) {
        (
            g.acquisitions
                .iter()
                .map(|a| a.iter().map(|&k| names[k]).collect())
                .collect(),
            g.left_out.iter().map(|&k| names[k]).collect(),
        )
    }

    #[test]
    fn one_acquisition_stays_one_group_with_every_file() {
        let names = [
            "a_data_000001.h5",
            "a_master.h5",
            "a.h5",
            "notes.txt",
            "a_data_000002.h5",
        ];
        let g = acquisitions(&names);
        assert_eq!(g.acquisitions, vec![vec![0, 1, 2, 3, 4]]);
        assert!(g.left_out.is_empty());
        assert_eq!(acquisitions(&["x.mib", "x.hdr"]).acquisitions.len(), 1);
        assert_eq!(
            acquisitions(&["scan_x4_y3.raw", "any.xml"])
                .acquisitions
                .len(),
            1
        );
    }

    #[test]
    fn several_acquisitions_take_their_own_files() {
        let names = [
            "b_data_000001.h5",
            "a_master.h5",
            "a_data_000001.h5",
            "b_master.h5",
            "a.h5",
            "stack.h5",
            "m.hdr",
            "m.mib",
            "scan_x4_y3.raw",
            "desc.xml",
            "notes.txt",
            "p.stem4d",
            "b_data_000002.h5",
        ];
        let (acqs, left) = named(&names, &acquisitions(&names));
        assert_eq!(
            acqs,
            vec![
                vec!["a_master.h5", "a_data_000001.h5", "a.h5"],
                vec!["b_master.h5", "b_data_000001.h5", "b_data_000002.h5"],
                vec!["stack.h5"],
                vec!["m.mib", "m.hdr"],
                vec!["scan_x4_y3.raw", "desc.xml"],
                vec!["p.stem4d"],
            ]
        );
        assert_eq!(left, vec!["notes.txt"]);
    }

    #[test]
    fn companions_without_their_own_root_are_left_out() {
        // Two .mib files and a header of neither stem: which one it describes is unknown.
        let names = ["x.mib", "y.mib", "z.hdr", "q_data_000001.h5"];
        let (acqs, left) = named(&names, &acquisitions(&names));
        assert_eq!(
            acqs,
            vec![vec!["x.mib"], vec!["y.mib"], vec!["q_data_000001.h5"]]
        );
        assert_eq!(left, vec!["z.hdr"]);
        // A prepared file of a master's stem is an acquisition, not its companion.
        let names = ["a_master.h5", "a.h5", "a.stem4d", "a_data_000001.h5"];
        let (acqs, _) = named(&names, &acquisitions(&names));
        assert_eq!(
            acqs,
            vec![
                vec!["a_master.h5", "a.h5", "a_data_000001.h5"],
                vec!["a.stem4d"]
            ]
        );
        // Case does not matter to extensions; a stem may hold dots.
        let names = ["A.B.MIB", "A.B.HDR", "c.H5"];
        let (acqs, _) = named(&names, &acquisitions(&names));
        assert_eq!(acqs, vec![vec!["A.B.MIB", "A.B.HDR"], vec!["c.H5"]]);
    }
}
