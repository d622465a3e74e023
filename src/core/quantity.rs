//! Kubernetes resource quantities, exactly: `64`, `1000m`, `512Gi`, `1.5`, `2e3`. Limits are
//! added up (a NodePool's cap plus the capacity of its draining nodes), so this keeps every value
//! as a whole number of nano-units (1e-9, the finest a quantity carries) in an i128: a sum of
//! exabytes still fits, and nothing is lost to floating point (`hpa::parse_quantity` is an f64
//! reading for ratios, not for sums that are written back).

/// A quantity in nano-units (1 = 1e-9 of the unit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(pub i128);

const NANO: i128 = 1_000_000_000;

/// Suffix -> multiplier in nano-units, binary first so `Ki` is not read as `K`+`i`.
const SUFFIXES: [(&str, i128); 15] = [
    ("Ki", 1 << 10),
    ("Mi", 1 << 20),
    ("Gi", 1 << 30),
    ("Ti", 1 << 40),
    ("Pi", 1 << 50),
    ("Ei", 1 << 60),
    ("n", -1),
    ("u", -2),
    ("m", -3),
    ("k", 1_000),
    ("M", 1_000_000),
    ("G", 1_000_000_000),
    ("T", 1_000_000_000_000),
    ("P", 1_000_000_000_000_000),
    ("E", 1_000_000_000_000_000_000),
];

/// The multiplier of `suffix` in nano-units ("" is 1). Negative table entries are 10^-k.
fn multiplier(suffix: &str) -> Option<i128> {
    if suffix.is_empty() {
        return Some(NANO);
    }
    SUFFIXES
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|(_, m)| match *m {
            -1 => 1,
            -2 => 1_000,
            -3 => 1_000_000,
            m => m * NANO,
        })
}

impl Quantity {
    /// Parses a quantity as the apiserver accepts it; None for anything else. A fraction finer
    /// than a nano-unit is rounded up, as Kubernetes does.
    pub fn parse(raw: &str) -> Option<Quantity> {
        let raw = raw.trim();
        let (sign, body) = match raw.strip_prefix('-') {
            Some(rest) => (-1, rest),
            None => (1, raw.strip_prefix('+').unwrap_or(raw)),
        };
        let digits_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(digits_end);
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if (int_part.is_empty() && frac_part.is_empty())
            || frac_part.contains('.')
            || int_part.len() > 30
            || frac_part.len() > 30
        {
            return None;
        }
        // Decimal exponent form: 1e3, 1.5E-3.
        let (unit, exp) = match suffix.strip_prefix(['e', 'E']) {
            Some(e) if !e.is_empty() => (NANO, Some(e.parse::<i32>().ok()?)),
            _ => (multiplier(suffix)?, None),
        };
        // value = (int_part.frac_part) * unit * 10^exp, in nano-units, exact or rounded up.
        let mantissa: i128 = format!("{int_part}{frac_part}").parse().unwrap_or(0);
        let scale = exp.unwrap_or(0) - frac_part.len() as i32;
        let mut value = mantissa.checked_mul(unit)?;
        if scale >= 0 {
            value = value.checked_mul(10i128.checked_pow(scale as u32)?)?;
        } else {
            let div = 10i128.checked_pow((-scale) as u32)?;
            value = (value + div - 1) / div;
        }
        Some(Quantity(sign * value))
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        self.0.checked_add(other.0).map(Quantity)
    }

    /// The quantity as text, readable next to `like` (the cap it was added to): in `like`'s
    /// suffix when exact in it (`512Gi` + `768Gi` reads `1280Gi`), else for a binary cap the
    /// largest binary suffix that is exact (`1Ti` + `128Gi` reads `1152Gi`), else whole units,
    /// else milli-units, else nano-units.
    pub fn format_like(self, like: &str) -> String {
        let like = like.trim();
        let suffix = like.trim_start_matches(|c: char| c.is_ascii_digit() || "+-.".contains(c));
        let exponent_form = suffix.starts_with(['e', 'E']);
        let mut candidates: Vec<&str> = Vec::new();
        if !exponent_form {
            candidates.push(suffix);
        }
        if suffix.ends_with('i') {
            candidates.extend(["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"]);
        }
        candidates.extend(["", "m", "n"]);
        for s in candidates {
            let Some(m) = multiplier(s) else { continue };
            if self.0 % m == 0 {
                return format!("{}{s}", self.0 / m);
            }
        }
        unreachable!("a nano-unit divides every quantity")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: i128 = NANO;

    /// (text, nano-units) - worked out by hand.
    #[test]
    fn parses_every_form_the_apiserver_accepts() {
        let cases: [(&str, Option<i128>); 16] = [
            ("64", Some(64 * G)),
            ("0", Some(0)),
            ("1000m", Some(G)),
            ("1500m", Some(1_500_000_000)),
            ("1.5", Some(1_500_000_000)),
            ("0.5Gi", Some(536_870_912 * G)),
            ("512Gi", Some(549_755_813_888 * G)),
            ("1Ki", Some(1024 * G)),
            ("2k", Some(2000 * G)),
            ("2e3", Some(2000 * G)),
            ("1E-3", Some(1_000_000)),
            ("100n", Some(100)),
            ("3u", Some(3000)),
            // Finer than a nano-unit: rounded up, as the apiserver does.
            ("0.0000000001", Some(1)),
            ("12Kb", None),
            ("", None),
        ];
        for (text, want) in cases {
            assert_eq!(Quantity::parse(text).map(|q| q.0), want, "{text}");
        }
        assert_eq!(Quantity::parse("-2").map(|q| q.0), Some(-2 * G));
        assert_eq!(Quantity::parse("1.2.3"), None);
        assert_eq!(Quantity::parse("Gi"), None);
    }

    /// (nano-units, written like, text) - by hand.
    #[test]
    fn formats_in_the_suffix_of_the_cap_when_exact() {
        let cases: [(i128, &str, &str); 8] = [
            (72 * G, "64", "72"),
            // 1Ti + 128Gi: not whole Ti, whole Gi.
            (1152 * (1 << 30) * G, "1Ti", "1152Gi"),
            (1280 * (1 << 30) * G, "512Gi", "1280Gi"),
            // 512Gi + 1000 bytes is not whole Gi: plain bytes.
            ((512 * (1 << 30) + 1000) * G, "512Gi", "549755814888"),
            (1_500_000_000, "1", "1500m"),
            (1_096 * G, "1000", "1096"),
            (2 * G, "2e3", "2"),
            (5, "1", "5n"),
        ];
        for (nano, like, want) in cases {
            assert_eq!(Quantity(nano).format_like(like), want, "{nano} like {like}");
        }
    }
}
