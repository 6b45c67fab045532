//! Drawing: the planes each panel's product is encoded into, and the view uniforms and
//! draw keys canvases are drawn with.

use super::*;

/// A panel's plane generation and view uniform: what its canvas shows.
pub type DrawKey = (u64, View);

/// Generations of [`Session::plane_gen`], unique across sessions.
pub(super) fn next_plane_gen() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Session {
    pub(super) async fn encode_image(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        st: &ViewState,
        detector: Option<&DetectorMask>,
    ) -> Result<()> {
        if st.image.kind.uses_derived() {
            self.ensure_derived(engine).await?;
        }
        let Some(res) = &self.resident else {
            let p = st.image.params();
            let product = self.exact_product(engine, &p, self.correction).await?;
            if matches!(st.image.kind, ImageKind::Commag | ImageKind::Comdir) {
                let [magnitude, angle] = polar_planes(&product);
                let f32s = |v: &[f32]| engine.input(bytemuck::cast_slice(v));
                let (magnitude, angle) = (f32s(&magnitude), f32s(&angle));
                let plain = |buf| PlaneSource::F32 { buf, stride: 1 };
                self.image.encode_prep(engine, enc, plain(&magnitude))?;
                if st.image.kind == ImageKind::Comdir {
                    self.image.encode_angle(engine, enc, plain(&angle))?;
                }
                return Ok(());
            }
            let plane = plane_of(&product, p.kind, st.image.axis);
            let buf = engine.input(bytemuck::cast_slice(&plane));
            return self.image.encode_prep(
                engine,
                enc,
                PlaneSource::F32 {
                    buf: &buf,
                    stride: 1,
                },
            );
        };
        let derived = || {
            self.derived
                .as_ref()
                .ok_or_else(|| Error::Gpu("the totals and CoM moments are missing".into()))
        };
        let need_moments = || {
            derived()?.moments.as_ref().ok_or_else(|| {
                Error::Gpu(
                    "centre-of-mass moments of this u32 detector could exceed 64 bits on the GPU"
                        .into(),
                )
            })
        };
        let axis = st.image.axis.min(1);
        match st.image.kind {
            ImageKind::Total => self.image.encode_prep(
                engine,
                enc,
                PlaneSource::U64 {
                    buf: &derived()?.totals,
                    stride: 2,
                    offset: 0,
                    scale: 1.0,
                },
            ),
            ImageKind::Com => self.image.encode_prep(
                engine,
                enc,
                PlaneSource::Com {
                    moments: need_moments()?,
                    axis,
                },
            ),
            ImageKind::Dpc => self.image.encode_prep(
                engine,
                enc,
                PlaneSource::Dpc {
                    moments: need_moments()?,
                    axis,
                    mean: derived()?.com_mean,
                    rotation: st.image.rotation,
                    flip: st.image.flip,
                },
            ),
            ImageKind::Commag | ImageKind::Comdir => {
                let direction = st.image.kind == ImageKind::Comdir;
                // The magnitude is made unturned: one plane, bit for bit, whatever the
                // rotation and flip (which do not change it).
                let dpc = crate::kernels::fft::DpcSettings {
                    mean: derived()?.com_mean,
                    rotation: if direction { st.image.rotation } else { 0.0 },
                    flip: direction && st.image.flip,
                };
                let centre = crate::kernels::fft::CentreSource::Moments {
                    buf: need_moments()?,
                    bound: crate::kernels::com_moments::moment_bound(res),
                };
                let pairs = &self.dpc_pairs;
                crate::kernels::fft::encode_dpc_pairs(
                    engine,
                    enc,
                    res.plan.shape.scan,
                    centre,
                    dpc,
                    pairs,
                )?;
                self.image
                    .encode_prep(engine, enc, PlaneSource::DpcMagnitude { pairs })?;
                if direction {
                    self.image
                        .encode_angle(engine, enc, PlaneSource::DpcAngle { pairs })?;
                }
                Ok(())
            }
            ImageKind::Idpc => {
                let moments = need_moments()?;
                let scan = res.plan.shape.scan;
                if self.idpc.as_ref().is_none_or(|(s, _)| *s != scan) {
                    self.idpc = Some((scan, crate::kernels::fft::Idpc::new(engine, scan)));
                }
                let (_, idpc) = self
                    .idpc
                    .as_ref()
                    .ok_or_else(|| Error::Gpu("iDPC plan missing".into()))?;
                let dpc = crate::kernels::fft::DpcSettings {
                    mean: derived()?.com_mean,
                    rotation: st.image.rotation,
                    flip: st.image.flip,
                };
                idpc.encode(
                    engine,
                    enc,
                    crate::kernels::fft::CentreSource::Moments {
                        buf: moments,
                        bound: crate::kernels::com_moments::moment_bound(res),
                    },
                    dpc,
                )?;
                self.image.encode_prep(
                    engine,
                    enc,
                    PlaneSource::F32 {
                        buf: &idpc.phase,
                        stride: 2,
                    },
                )
            }
            _ => {
                let mask = detector.ok_or_else(|| Error::param("this image needs a detector"))?;
                let SparseMask { indices, .. } = mask.sparse(self.det());
                let list = crate::kernels::masked_sum::DetectorList::new(engine, &indices)?;
                crate::kernels::masked_sum::encode_masked_sums(
                    engine,
                    enc,
                    res,
                    &list,
                    &self.image_sums,
                )?;
                let src = if st.image.kind == ImageKind::Df {
                    PlaneSource::U64Diff {
                        total: &derived()?.totals,
                        part: &self.image_sums,
                    }
                } else {
                    PlaneSource::U64 {
                        buf: &self.image_sums,
                        stride: 2,
                        offset: 0,
                        scale: 1.0,
                    }
                };
                self.image.encode_prep(engine, enc, src)
            }
        }
    }

    pub(super) async fn encode_pattern(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        st: &ViewState,
    ) -> Result<()> {
        let scan = self.acq.shape.scan;
        let roi = st
            .image
            .scan_roi()?
            .unwrap_or(ScanRoi::Rect(Region::full(scan)));
        let Some(res) = &self.resident else {
            let mut p = ProductParams::new(st.pattern.source.product_kind());
            p.at = Some(st.image.cursor);
            p.scan_roi = match roi {
                ScanRoi::Rect(r) => Some(r),
                ScanRoi::Circle { .. } if st.pattern.source != PatternSource::Cursor => {
                    return Err(Error::param(
                        "circular scan ROIs need the acquisition on the GPU (integer data); use a rectangle",
                    ))
                }
                ScanRoi::Circle { .. } => None,
            };
            let plane = plane_of(
                &self.exact_product(engine, &p, self.correction).await?,
                p.kind,
                0,
            );
            let buf = engine.input(bytemuck::cast_slice(&plane));
            return self.pattern.encode_prep(
                engine,
                enc,
                PlaneSource::F32 {
                    buf: &buf,
                    stride: 1,
                },
            );
        };
        match st.pattern.source {
            PatternSource::Cursor => {
                let frame = st.image.cursor[0] * scan[1] + st.image.cursor[1];
                self.pattern
                    .encode_prep(engine, enc, PlaneSource::Frame { res, frame })
            }
            source => {
                crate::kernels::pattern_reduce::encode_pattern_reduce(
                    engine,
                    enc,
                    res,
                    &roi,
                    &self.pattern_sums,
                )?;
                let src = match source {
                    PatternSource::Max => PlaneSource::U32 {
                        buf: &self.pattern_sums,
                        stride: 4,
                        offset: 2,
                    },
                    _ => PlaneSource::U64 {
                        buf: &self.pattern_sums,
                        stride: 4,
                        offset: 0,
                        scale: if source == PatternSource::Mean {
                            1.0 / roi.count(scan) as f32
                        } else {
                            1.0
                        },
                    },
                };
                self.pattern.encode_prep(engine, enc, src)
            }
        }
    }

    pub(super) fn plane(&self, panel: Panel) -> &Plane {
        match panel {
            Panel::Image => &self.image,
            Panel::Pattern => &self.pattern,
        }
    }

    /// What a canvas of `panel` shows after [`Session::encode_draw`]: equal keys, equal pixels.
    pub fn draw_key(&self, panel: Panel, canvas: [u32; 2]) -> Result<DrawKey> {
        let g = self.plane_gen[(panel == Panel::Pattern) as usize];
        Ok((g, self.view_uniform(panel, canvas)?))
    }

    /// The render uniform of `panel` on a `canvas` of (width, height) device pixels.
    pub fn view_uniform(&self, panel: Panel, canvas: [u32; 2]) -> Result<View> {
        let st = self
            .state
            .as_ref()
            .ok_or_else(|| Error::param("no view yet: call update first"))?;
        let plane = self.plane(panel);
        let d = match panel {
            Panel::Image => &st.image.display,
            Panel::Pattern => &st.pattern.display,
        };
        let [pan_r, pan_c] = d
            .pan
            .unwrap_or([plane.height as f32 / 2.0, plane.width as f32 / 2.0]);
        let mut v = View {
            canvas_w: canvas[0].max(1),
            canvas_h: canvas[1].max(1),
            cmap: display::colormap_index(&d.cmap)?,
            scale: d.scale.code(),
            wheel: (panel == Panel::Image && st.image.kind == ImageKind::Comdir) as u32,
            zoom: d.zoom,
            pan_r,
            pan_c,
            line_px: 1.0,
            ..Default::default()
        };
        let f = |x: Option<f64>| x.unwrap_or(0.0) as f32;
        let rect = |v: &mut View, a: Region| {
            v.overlay = 3;
            (v.rect_r0, v.rect_r1, v.rect_c0, v.rect_c1) =
                (a.r0 as f32, a.r1 as f32, a.c0 as f32, a.c1 as f32);
        };
        match panel {
            Panel::Image => {
                if st.image.cursor_marker {
                    v.cursor_on = 1;
                    v.cursor_r = st.image.cursor[0] as f32;
                    v.cursor_c = st.image.cursor[1] as f32;
                }
                if let Some(roi) = st.image.roi {
                    rect(&mut v, region(roi));
                }
                if let Some([r, c, radius]) = st.image.roi_circle {
                    v.overlay = 1;
                    (v.o_r, v.o_c, v.o_outer) = (r as f32, c as f32, radius as f32);
                }
            }
            Panel::Pattern if st.image.detector_marker => {
                let i = &st.image;
                let [cr, cc] = i.center.unwrap_or([0.0, 0.0]);
                (v.o_r, v.o_c) = (cr as f32, cc as f32);
                match i.kind {
                    ImageKind::Bf | ImageKind::Df => {
                        v.overlay = 1;
                        v.o_outer = f(i.radius);
                    }
                    ImageKind::Adf => {
                        v.overlay = 2;
                        (v.o_inner, v.o_outer) = (f(i.inner), f(i.outer));
                    }
                    ImageKind::Rect => {
                        if let Some(a) = i.rect {
                            rect(&mut v, a);
                        }
                    }
                    ImageKind::Point => {
                        if let Some([r, c]) = i.point {
                            v.overlay = 4;
                            (v.o_r, v.o_c) = (r as f32, c as f32);
                        }
                    }
                    _ => {}
                }
            }
            // Drawn on the page's overlay: nothing of the detector in the uniform, so that
            // the pattern's draw key stays put while it is dragged.
            Panel::Pattern => {}
        }
        Ok(v)
    }

    /// Record drawing `panel` into `target` (a canvas texture of `canvas` pixels).
    pub fn encode_draw(
        &mut self,
        engine: &Engine,
        enc: &mut wgpu::CommandEncoder,
        panel: Panel,
        target: &wgpu::TextureView,
        format: wgpu::TextureFormat,
        canvas: [u32; 2],
    ) -> Result<()> {
        let view = self.view_uniform(panel, canvas)?;
        engine
            .renderer(format)
            .encode_draw(engine, enc, target, self.plane(panel), &view);
        Ok(())
    }
}
