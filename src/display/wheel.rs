//! The colour wheel of the DPC direction image (`comdir`): hue is the direction, value
//! (brightness) the magnitude placed between the panel's limits, at full saturation (HSV).
//! Hue 0 (red) is the +row direction, and the hue turns with the angle towards +col:
//! 60° yellow, 120° green, 180° cyan, 240° blue, 300° magenta (`contract::dpc_polar` gives
//! the angle). `display.wgsl`'s `wheel_rgb` is the same rule, operation for operation
//! (C-DPC-POLAR).

/// 1 / 2π as float32 (the kernel's constant).
const INV_TAU: f32 = 0.159_154_94;

/// Colour (0..1 per channel) of direction `angle` (radians) at brightness `value` (0..1).
pub fn wheel_rgb(angle: f32, value: f32) -> [f32; 3] {
    let turn = angle * INV_TAU;
    let h6 = (turn - turn.floor()) * 6.0;
    [5.0f32, 3.0, 1.0].map(|n| {
        let k = n + h6;
        let k = if k >= 6.0 { k - 6.0 } else { k };
        value - value * k.min(4.0 - k).clamp(0.0, 1.0)
    })
}

/// [`wheel_rgb`] as 8-bit channels, rounded as a unorm render target stores them.
pub fn wheel_u8(angle: f32, value: f32) -> [u8; 3] {
    wheel_rgb(angle, value).map(|c| (c * 255.0).round().clamp(0.0, 255.0) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wheel_turns_from_red_at_plus_row_towards_plus_col() {
        let deg = |d: f32| d.to_radians();
        assert_eq!(wheel_u8(0.0, 1.0), [255, 0, 0]);
        assert_eq!(wheel_u8(deg(60.0), 1.0), [255, 255, 0]);
        assert_eq!(wheel_u8(deg(120.0), 1.0), [0, 255, 0]);
        assert_eq!(wheel_u8(std::f32::consts::PI, 1.0), [0, 255, 255]);
        assert_eq!(wheel_u8(deg(-120.0), 1.0), [0, 0, 255]);
        assert_eq!(wheel_u8(deg(-60.0), 1.0), [255, 0, 255]);
        assert_eq!(wheel_u8(-std::f32::consts::PI, 1.0), [0, 255, 255]);
        // Brightness scales every channel; zero is black in every direction.
        assert_eq!(wheel_u8(deg(120.0), 0.5), [0, 128, 0]);
        assert_eq!(wheel_u8(deg(33.0), 0.0), [0, 0, 0]);
    }
}
