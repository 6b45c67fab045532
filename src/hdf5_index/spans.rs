//! File spans: the chunks of an index coalesced into the fewest reads.

use super::*;

/// Chunk byte ranges coalesced into large sequential reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Span {
    pub file: String,
    pub offset: u64,
    pub len: u64,
    /// Index range into the data set's chunk table.
    pub first_chunk: usize,
    pub chunk_count: usize,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpanPlan {
    pub spans: Vec<Span>,
}

impl SpanPlan {
    /// Merge chunks that follow each other in the file (gaps up to `max_gap` bytes are read
    /// and dropped) into spans of at most `max_span` bytes.
    pub fn coalesce(index: &DatasetIndex, max_gap: u64, max_span: u64) -> SpanPlan {
        let mut spans: Vec<Span> = Vec::new();
        for (i, c) in index.chunks.iter().enumerate() {
            if let Some(s) = spans.last_mut() {
                let end = s.offset + s.len;
                let new_end = c.offset + c.size;
                if c.offset >= end && c.offset - end <= max_gap && new_end - s.offset <= max_span {
                    s.len = new_end - s.offset;
                    s.chunk_count += 1;
                    continue;
                }
            }
            spans.push(Span {
                file: index.file.clone(),
                offset: c.offset,
                len: c.size,
                first_chunk: i,
                chunk_count: 1,
            });
        }
        SpanPlan { spans }
    }

    pub fn bytes(&self) -> u64 {
        self.spans.iter().map(|s| s.len).sum()
    }
}
