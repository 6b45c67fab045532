//! 2-D FFT (rows then columns) with rustfft's plans for any length; the inverse is
//! normalised by `1/(rows·cols)` like numpy's `ifft2`. Any length, as iDPC needs (C-IDPC).

use rustfft::num_complex::Complex;
use rustfft::FftPlanner;

pub fn fft2(data: &mut [Complex<f64>], rows: usize, cols: usize, inverse: bool) {
    let mut planner = FftPlanner::<f64>::new();
    let plan = |n: usize, p: &mut FftPlanner<f64>| {
        if inverse {
            p.plan_fft_inverse(n)
        } else {
            p.plan_fft_forward(n)
        }
    };
    let row_fft = plan(cols, &mut planner);
    for row in data.chunks_exact_mut(cols) {
        row_fft.process(row);
    }
    let col_fft = plan(rows, &mut planner);
    let mut column = vec![Complex::new(0.0, 0.0); rows];
    for j in 0..cols {
        for i in 0..rows {
            column[i] = data[i * cols + j];
        }
        col_fft.process(&mut column);
        for i in 0..rows {
            data[i * cols + j] = column[i];
        }
    }
    if inverse {
        let s = 1.0 / (rows * cols) as f64;
        data.iter_mut().for_each(|v| *v *= s);
    }
}
