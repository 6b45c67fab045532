//! The display on the GPU: a product already on the GPU is turned into an f32 plane, its
//! limits and histogram are computed there, and the renderer draws it with a colour map and
//! the user's overlays. Nothing is read back while the user drags; readback (hover values,
//! the histogram, PNG export) is explicit and asynchronous. The planes are float32 renderings
//! of the exact products, never products themselves (C-DISPLAY).

use crate::display::{lut_words, Limits, Scale, Stats, HIST_BINS, STATS_HEADER};
use crate::error::{Error, Result};

use crate::gpu::{Engine, Resident};
use crate::kernels::{self, grid, PrepParams, StatsParams, View};

/// Where a plane's values come from (see `display_prep.wgsl`).
pub enum PlaneSource<'a> {
    /// Exact u64 sums, `stride` words apart from word `offset` (masked sums, pattern sums),
    /// times `scale` (1/count for a mean pattern).
    U64 {
        buf: &'a wgpu::Buffer,
        stride: u32,
        offset: u32,
        scale: f32,
    },
    /// `total − part`, both u64 per position (DF through the cached totals).
    U64Diff {
        total: &'a wgpu::Buffer,
        part: &'a wgpu::Buffer,
    },
    /// u32 values (the max pattern).
    U32 {
        buf: &'a wgpu::Buffer,
        stride: u32,
        offset: u32,
    },
    /// Frame `frame` of the resident (the pattern at the cursor), read out of its tile.
    Frame { res: &'a Resident, frame: usize },
    /// CoM (row when `axis == 0`) from the fused moments.
    Com {
        moments: &'a wgpu::Buffer,
        axis: u32,
    },
    /// DPC: CoM − scan mean, flip, rotation (degrees).
    Dpc {
        moments: &'a wgpu::Buffer,
        axis: u32,
        mean: [f64; 2],
        rotation: f64,
        flip: bool,
    },
    /// f32 values `stride` words apart (1: a plain plane; 2: real parts of complex values).
    F32 { buf: &'a wgpu::Buffer, stride: u32 },
    /// The magnitude `|g|` of DPC vectors held as (g_r, g_c) float32 pairs
    /// ([`crate::kernels::fft::encode_dpc_pairs`]).
    DpcMagnitude { pairs: &'a wgpu::Buffer },
    /// Their direction `atan2(g_c, g_r)`, radians in (−π, π] (0 for a zero vector).
    DpcAngle { pairs: &'a wgpu::Buffer },
}

/// A 2-D plane of display values with its stats buffer, and, for planes that can show a
/// direction image, a second plane of angles (the colour wheel's hue).
pub struct Plane {
    pub width: u32,
    pub height: u32,
    pub values: wgpu::Buffer,
    pub stats: wgpu::Buffer,
    pub angle: Option<wgpu::Buffer>,
}

const STATS_WORDS: u64 = (STATS_HEADER + HIST_BINS) as u64;

impl Plane {
    pub fn new(engine: &Engine, width: u32, height: u32) -> Plane {
        Plane {
            width,
            height,
            values: engine.storage("display plane", width as u64 * height as u64 * 4),
            stats: engine.storage("display stats", STATS_WORDS * 4),
            angle: None,
        }
    }

    /// A plane that can also hold a direction per pixel ([`Plane::encode_angle`]).
    pub fn with_angle(engine: &Engine, width: u32, height: u32) -> Plane {
        Plane {
            angle: Some(engine.storage("display angle", width as u64 * height as u64 * 4)),
            ..Plane::new(engine, width, height)
        }
    }

    fn angle_buffer(&self) -> Result<&wgpu::Buffer> {
        self.angle
            .as_ref()
            .ok_or_else(|| Error::Gpu("this display plane holds no directions".into()))
    }

    pub fn len(&self) -> u32 {
        self.width * self.height
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Record the conversion of `src` into this plane.
    pub fn encode_prep(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        src: PlaneSource,
    ) -> Result<()> {
        self.encode_prep_into(engine, encoder, src, &self.values)
    }

    /// Record the conversion of `src` (a direction: [`PlaneSource::DpcAngle`]) into the
    /// plane's angles, the colour wheel's hue.
    pub fn encode_angle(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        src: PlaneSource,
    ) -> Result<()> {
        self.encode_prep_into(engine, encoder, src, self.angle_buffer()?)
    }

    fn encode_prep_into(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        src: PlaneSource,
        out: &wgpu::Buffer,
    ) -> Result<()> {
        let n = self.len();
        let groups = grid(n.div_ceil(256));
        let mut p = PrepParams {
            n,
            groups_x: groups.0,
            stride: 2,
            cos_t: 1.0,
            scale: 1.0,
            ..Default::default()
        };
        let (a, b) = match src {
            PlaneSource::U64 {
                buf,
                stride,
                offset,
                scale,
            } => {
                (p.source, p.stride, p.offset, p.scale) = (0, stride, offset, scale);
                (buf, buf)
            }
            PlaneSource::U64Diff { total, part } => {
                p.source = 1;
                (part, total)
            }
            PlaneSource::U32 {
                buf,
                stride,
                offset,
            } => {
                (p.source, p.stride, p.offset) = (2, stride, offset);
                (buf, buf)
            }
            PlaneSource::Frame { res, frame } => {
                let (seg, tile_offset, position) = res
                    .plan
                    .locate(frame)
                    .ok_or_else(|| Error::param("the cursor is outside the resident frames"))?;
                let buf = &res.buffers[seg];
                // A compressed resident: the frame's tile unpacked into the scratch first,
                // where it is the first tile.
                let tile = tile_offset / res.plan.tile_words;
                let mut batch = crate::gpu::Batch::default();
                res.unpack(engine, &mut batch, seg, None, (tile, tile + 1))?;
                batch.flush(encoder);
                let offset = if res.packed.is_some() { 0 } else { tile_offset };
                (p.source, p.offset, p.stride, p.bits) = (3, offset, position, res.plan.bits);
                (buf, buf)
            }
            PlaneSource::Com { moments, axis } => {
                p.source = 4 + axis.min(1);
                (moments, moments)
            }
            PlaneSource::Dpc {
                moments,
                axis,
                mean,
                rotation,
                flip,
            } => {
                let (s, c) = rotation.to_radians().sin_cos();
                p.source = 6 + axis.min(1);
                (p.mean_r, p.mean_c, p.cos_t, p.sin_t) =
                    (mean[0] as f32, mean[1] as f32, c as f32, s as f32);
                p.flip = flip as u32;
                (moments, moments)
            }
            PlaneSource::F32 { buf, stride } => {
                (p.source, p.stride) = (8, stride);
                (buf, buf)
            }
            PlaneSource::DpcMagnitude { pairs } => {
                p.source = 9;
                (pairs, pairs)
            }
            PlaneSource::DpcAngle { pairs } => {
                p.source = 10;
                (pairs, pairs)
            }
        };
        let params = engine.uniform(&p);
        engine.dispatch(
            encoder,
            &kernels::DISPLAY_PREP,
            &[&params, a, b, out],
            groups,
        )
    }

    /// Record the limits/histogram kernels on `scale`: the stats buffer cleared, min/max and
    /// the histogram over many workgroups, the limits in one (`display_stats.wgsl`).
    pub fn encode_stats(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        limits: Limits,
        scale: Scale,
    ) -> Result<()> {
        limits.validate()?;
        let k = limits.for_kernel(scale);
        let params = engine.uniform(&StatsParams {
            n: self.len(),
            mode: k.mode,
            scale: scale.code(),
            p_lo: k.p_lo,
            p_hi: k.p_hi,
            abs_lo: k.abs_lo,
            abs_hi: k.abs_hi,
            shown_lo: k.shown_lo,
            shown_hi: k.shown_hi,
            ..Default::default()
        });
        // A workgroup walks blocks of 1,024 values: one block each for min/max, at least
        // four for the histogram, whose bins each workgroup then adds to the buffer's.
        let n = self.len();
        let minmax = n.div_ceil(1024).clamp(1, 1024);
        let hist = n.div_ceil(4096).clamp(1, 256);
        encoder.clear_buffer(&self.stats, 0, None);
        let walk = [(0, &params), (1, &self.values), (2, &self.stats)];
        let mut batch = crate::gpu::Batch::default();
        batch.add(engine, &kernels::DISPLAY_STATS, &walk, (minmax, 1))?;
        batch.add(engine, &kernels::DISPLAY_HIST, &walk, (hist, 1))?;
        batch.add(
            engine,
            &kernels::DISPLAY_LIMITS,
            &[(0, &params), (2, &self.stats)],
            (1, 1),
        )?;
        batch.flush(encoder);
        Ok(())
    }

    pub async fn read_stats(&self, engine: &Engine) -> Result<Stats> {
        let bytes = engine.read_back(&self.stats, STATS_WORDS * 4).await?;
        Stats::from_words(&bytemuck::pod_collect_to_vec::<u8, u32>(&bytes))
    }

    pub async fn read_values(&self, engine: &Engine) -> Result<Vec<f32>> {
        let bytes = engine
            .read_back(&self.values, self.len() as u64 * 4)
            .await?;
        Ok(bytemuck::pod_collect_to_vec::<u8, f32>(&bytes)[..self.len() as usize].to_vec())
    }

    /// The directions (radians) of a plane that holds them.
    pub async fn read_angles(&self, engine: &Engine) -> Result<Vec<f32>> {
        let bytes = engine
            .read_back(self.angle_buffer()?, self.len() as u64 * 4)
            .await?;
        Ok(bytemuck::pod_collect_to_vec::<u8, f32>(&bytes)[..self.len() as usize].to_vec())
    }

    /// One value (hover readout): a 4-byte readback.
    pub async fn read_value(&self, engine: &Engine, r: u32, c: u32) -> Result<f32> {
        self.read_one(engine, &self.values, r, c).await
    }

    /// One direction (radians; hover readout of a direction image).
    pub async fn read_angle(&self, engine: &Engine, r: u32, c: u32) -> Result<f32> {
        self.read_one(engine, self.angle_buffer()?, r, c).await
    }

    async fn read_one(&self, engine: &Engine, buf: &wgpu::Buffer, r: u32, c: u32) -> Result<f32> {
        let k = (r.min(self.height.saturating_sub(1)) * self.width
            + c.min(self.width.saturating_sub(1))) as u64;
        let bytes = engine.read_back_range(buf, k * 4, 4).await?;
        Ok(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

/// The render pipeline and colour-map table for one target format (handles: a clone
/// shares them).
#[derive(Clone)]
pub struct Renderer {
    pipeline: wgpu::RenderPipeline,
    /// Asked for once, as the compute kernels' layouts are (see `Engine::pipelines`).
    layout: wgpu::BindGroupLayout,
    lut: wgpu::Buffer,
}

impl Renderer {
    pub fn new(engine: &Engine, format: wgpu::TextureFormat) -> Renderer {
        let module = engine
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("display"),
                source: wgpu::ShaderSource::Wgsl(kernels::RENDER.source().into()),
            });
        let pipeline = engine
            .device
            .create_render_pipeline(&wgpu::RenderPipelineDescriptor {
                label: Some("display"),
                layout: None,
                vertex: wgpu::VertexState {
                    module: &module,
                    entry_point: Some("vs_main"),
                    compilation_options: Default::default(),
                    buffers: &[],
                },
                fragment: Some(wgpu::FragmentState {
                    module: &module,
                    entry_point: Some("fs_main"),
                    compilation_options: Default::default(),
                    targets: &[Some(format.into())],
                }),
                primitive: Default::default(),
                depth_stencil: None,
                multisample: Default::default(),
                multiview_mask: None,
                cache: None,
            });
        Renderer {
            layout: pipeline.get_bind_group_layout(0),
            pipeline,
            lut: engine.input(&lut_words()),
        }
    }

    /// Record drawing `plane` into `target` as `view` says.
    pub fn encode_draw(
        &self,
        engine: &Engine,
        encoder: &mut wgpu::CommandEncoder,
        target: &wgpu::TextureView,
        plane: &Plane,
        view: &View,
    ) {
        let view = View {
            src_w: plane.width,
            src_h: plane.height,
            ..*view
        };
        let params = engine.uniform(&view);
        let bind = engine.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("display"),
            layout: &self.layout,
            entries: &[
                entry(0, &params),
                entry(1, &plane.values),
                entry(2, &plane.stats),
                entry(3, &self.lut),
                // The colour wheel's hue; a plane without directions binds its values,
                // which the shader then leaves unread (`view.wheel` is 0).
                entry(4, plane.angle.as_ref().unwrap_or(&plane.values)),
            ],
        });
        let clock = engine.pass_clock();
        let mut pass = encoder.begin_render_pass(&wgpu::RenderPassDescriptor {
            label: Some("display"),
            timestamp_writes: clock.as_deref().and_then(|c| c.render_writes("display")),
            color_attachments: &[Some(cleared_to_black(target))],
            ..Default::default()
        });
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &bind, &[]);
        pass.draw(0..3, 0..1);
    }
}

/// A canvas's frame drawn off screen and copied where the CPU can map it: what a page
/// presents itself (a 2D canvas) where presenting a WebGPU canvas costs the browser a
/// readback of its own (software compositing). RGBA8 in memory order, rows padded to
/// wgpu's copy alignment: [`PixelTarget::row_bytes`] apart.
pub struct PixelTarget {
    pub size: [u32; 2],
    texture: wgpu::Texture,
    pub view: wgpu::TextureView,
    /// MAP_READ: the frame's pixels once the copy recorded by [`PixelTarget::encode_copy`]
    /// has run.
    pub pixels: wgpu::Buffer,
}

impl PixelTarget {
    /// Its texture format; the renderer for it draws the same colours as a canvas's.
    pub const FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;

    pub fn new(engine: &Engine, size: [u32; 2]) -> PixelTarget {
        let [w, h] = size;
        let texture = engine.device.create_texture(&wgpu::TextureDescriptor {
            label: Some("frame"),
            size: wgpu::Extent3d {
                width: w,
                height: h,
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: Self::FORMAT,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let pixels = engine.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("frame pixels"),
            size: u64::from(padded_row_bytes(w)) * u64::from(h),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        PixelTarget {
            size,
            view: texture.create_view(&Default::default()),
            texture,
            pixels,
        }
    }

    /// Bytes from one row of [`PixelTarget::pixels`] to the next.
    pub fn row_bytes(&self) -> u32 {
        padded_row_bytes(self.size[0])
    }

    /// Record the copy of what was drawn into [`PixelTarget::view`] to its pixel buffer.
    pub fn encode_copy(&self, encoder: &mut wgpu::CommandEncoder) {
        encoder.copy_texture_to_buffer(
            self.texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &self.pixels,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(self.row_bytes()),
                    rows_per_image: None,
                },
            },
            self.texture.size(),
        );
    }

    /// The frame's pixels, `width × 4` bytes a row with the padding dropped, once the copy
    /// has been submitted (tests and the native side; the page hands the mapping to its 2D
    /// canvas as it is).
    pub async fn read(&self, engine: &Engine) -> Result<Vec<u8>> {
        engine
            .mapped_for_read(&self.pixels, "frame readback")
            .await?;
        let out = {
            let view = self
                .pixels
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("frame readback mapping failed: {e:?}")))?;
            unpad_rows(&view, self.row_bytes(), self.size)
        };
        self.pixels.unmap();
        Ok(out)
    }
}

/// `width` RGBA8 texels, rounded up to the row alignment of texture-to-buffer copies.
pub fn padded_row_bytes(width: u32) -> u32 {
    (width * 4).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)
}

/// Rows of `size[0]` RGBA8 texels out of rows `row_bytes` apart.
pub fn unpad_rows(padded: &[u8], row_bytes: u32, size: [u32; 2]) -> Vec<u8> {
    let used = size[0] as usize * 4;
    padded
        .chunks(row_bytes as usize)
        .take(size[1] as usize)
        .flat_map(|row| &row[..used.min(row.len())])
        .copied()
        .collect()
}

/// `target` as a render pass's colour attachment, cleared to black (where no plane is drawn)
/// and kept.
pub fn cleared_to_black(target: &wgpu::TextureView) -> wgpu::RenderPassColorAttachment<'_> {
    wgpu::RenderPassColorAttachment {
        view: target,
        depth_slice: None,
        resolve_target: None,
        ops: wgpu::Operations {
            load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
            store: wgpu::StoreOp::Store,
        },
    }
}

fn entry(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
    wgpu::BindGroupEntry {
        binding,
        resource: buffer.as_entire_binding(),
    }
}
