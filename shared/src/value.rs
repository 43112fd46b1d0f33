//! The store-neutral attribute value: what items, keys and staged writes
//! hold, whatever the store. Numbers keep their exact decimal text (as
//! DynamoDB does, up to 38 significant digits); [`Decimal`] compares and adds
//! them exactly.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;

/// One attribute value (DynamoDB's data model, without its SDK types).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttrValue {
    /// A string.
    S(String),
    /// A number, as its exact decimal text.
    N(String),
    /// Binary.
    B(Vec<u8>),
    /// A boolean.
    Bool(bool),
    /// Null.
    Null,
    /// A list.
    L(Vec<AttrValue>),
    /// A map.
    M(HashMap<String, AttrValue>),
    /// A string set.
    Ss(Vec<String>),
    /// A number set.
    Ns(Vec<String>),
    /// A binary set.
    Bs(Vec<Vec<u8>>),
}

impl AttrValue {
    /// A string value.
    pub fn s(v: impl Into<String>) -> Self {
        AttrValue::S(v.into())
    }

    /// A number value from anything that prints as a number (`5`, `-3`,
    /// `u64::MAX`, a [`Decimal`]).
    pub fn n(v: impl fmt::Display) -> Self {
        AttrValue::N(v.to_string())
    }

    /// The string, if this is one.
    pub fn as_s(&self) -> Option<&str> {
        match self {
            AttrValue::S(s) => Some(s),
            _ => None,
        }
    }

    /// The number's text, if this is a number.
    pub fn as_n(&self) -> Option<&str> {
        match self {
            AttrValue::N(n) => Some(n),
            _ => None,
        }
    }

    /// The number as an `i64`, if this is a whole number in range.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_n()?.parse().ok()
    }

    /// The number as an exact [`Decimal`], if this is a valid number.
    pub fn as_decimal(&self) -> Option<Decimal> {
        self.as_n()?.parse().ok()
    }

    /// The boolean, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            AttrValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The map, if this is one.
    pub fn as_m(&self) -> Option<&HashMap<String, AttrValue>> {
        match self {
            AttrValue::M(m) => Some(m),
            _ => None,
        }
    }

    /// The list, if this is one.
    pub fn as_l(&self) -> Option<&[AttrValue]> {
        match self {
            AttrValue::L(l) => Some(l),
            _ => None,
        }
    }
}

impl From<&str> for AttrValue {
    fn from(v: &str) -> Self {
        AttrValue::S(v.to_owned())
    }
}

impl From<String> for AttrValue {
    fn from(v: String) -> Self {
        AttrValue::S(v)
    }
}

impl From<bool> for AttrValue {
    fn from(v: bool) -> Self {
        AttrValue::Bool(v)
    }
}

macro_rules! number_from {
    ($($t:ty),*) => {$(
        impl From<$t> for AttrValue {
            fn from(v: $t) -> Self {
                AttrValue::N(v.to_string())
            }
        }
    )*};
}
number_from!(i8, i16, i32, i64, i128, u8, u16, u32, u64, u128, Decimal);

/// Significant digits a number may have (DynamoDB's limit).
pub const MAX_DIGITS: u32 = 38;

/// An exact decimal number of at most [`MAX_DIGITS`] significant digits:
/// `mantissa × 10^exponent`, with no trailing zero in the mantissa.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Decimal {
    mantissa: i128,
    exponent: i32,
}

/// Why a number is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NumberError {
    /// Not a decimal number.
    #[error("{0:?} is not a number")]
    Syntax(String),
    /// More significant digits than a store keeps.
    #[error("more than {MAX_DIGITS} significant digits")]
    Precision,
    /// Outside DynamoDB's range (magnitude 1E-130 to under 1E+126).
    #[error("magnitude out of range")]
    Range,
}

const TEN: i128 = 10;

fn digits(mut m: i128) -> u32 {
    let mut n = 0;
    while m != 0 {
        m /= 10;
        n += 1;
    }
    n
}

impl Decimal {
    /// Zero.
    pub const ZERO: Decimal = Decimal {
        mantissa: 0,
        exponent: 0,
    };

    fn new(mut mantissa: i128, mut exponent: i32) -> Result<Self, NumberError> {
        if mantissa == 0 {
            return Ok(Self::ZERO);
        }
        while mantissa % TEN == 0 {
            mantissa /= TEN;
            exponent += 1;
        }
        let n = digits(mantissa);
        if n > MAX_DIGITS {
            return Err(NumberError::Precision);
        }
        // The most significant digit sits at 10^(n - 1 + exponent).
        let top = i64::from(n) - 1 + i64::from(exponent);
        if !(-130..=125).contains(&top) {
            return Err(NumberError::Range);
        }
        Ok(Self { mantissa, exponent })
    }

    /// Exact addition; an error when the sum needs more than
    /// [`MAX_DIGITS`] significant digits or leaves the range.
    pub fn checked_add(self, other: Decimal) -> Result<Decimal, NumberError> {
        if self.mantissa == 0 {
            return Ok(other);
        }
        if other.mantissa == 0 {
            return Ok(self);
        }
        let (hi, lo) = if self.exponent >= other.exponent {
            (self, other)
        } else {
            (other, self)
        };
        // In units of the low operand's last digit (non-zero), a valid sum
        // is under 10^38, so the high operand scaled is under 2 × 10^38:
        // within u128. Beyond that the sum needs more than 38 digits.
        let shift = u32::try_from(hi.exponent - lo.exponent).map_err(|_| NumberError::Precision)?;
        let (hm, lm) = (hi.mantissa.unsigned_abs(), lo.mantissa.unsigned_abs());
        let scaled = 10u128
            .checked_pow(shift)
            .and_then(|p| hm.checked_mul(p))
            .ok_or(NumberError::Precision)?;
        let (negative, magnitude) = if (hi.mantissa < 0) == (lo.mantissa < 0) {
            (
                hi.mantissa < 0,
                scaled.checked_add(lm).ok_or(NumberError::Precision)?,
            )
        } else if scaled >= lm {
            (hi.mantissa < 0, scaled - lm)
        } else {
            (lo.mantissa < 0, lm - scaled)
        };
        let m = i128::try_from(magnitude).map_err(|_| NumberError::Precision)?;
        Decimal::new(if negative { -m } else { m }, lo.exponent)
    }

    /// Whether this is zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }
}

impl From<i64> for Decimal {
    fn from(v: i64) -> Self {
        // An i64 has at most 19 digits: always valid.
        Decimal::new(i128::from(v), 0).unwrap_or(Decimal::ZERO)
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let sign = |d: &Decimal| d.mantissa.signum();
        match sign(self).cmp(&sign(other)) {
            Ordering::Equal if self.mantissa == 0 => Ordering::Equal,
            Ordering::Equal => {
                // Same sign, both non-zero: compare magnitudes by the position
                // of the leading digit, then digit by digit.
                let top = |d: &Decimal| i64::from(digits(d.mantissa)) + i64::from(d.exponent);
                let by_magnitude = top(self).cmp(&top(other)).then_with(|| {
                    let e = self.exponent.min(other.exponent);
                    // Same leading digit position: aligned, each has as
                    // many digits as the longer mantissa (at most 38).
                    let align = |d: &Decimal| {
                        d.mantissa.unsigned_abs() * 10u128.pow((d.exponent - e) as u32)
                    };
                    align(self).cmp(&align(other))
                });
                if self.mantissa > 0 {
                    by_magnitude
                } else {
                    by_magnitude.reverse()
                }
            }
            unequal => unequal,
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl std::str::FromStr for Decimal {
    type Err = NumberError;

    /// Decimal text as DynamoDB takes it: an optional sign, digits with an
    /// optional point, an optional exponent (`-12.50`, `1E+3`).
    fn from_str(text: &str) -> Result<Self, NumberError> {
        let syntax = || NumberError::Syntax(text.to_owned());
        let t = text.trim();
        let (negative, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let (body, exp) = match t.find(['e', 'E']) {
            Some(i) => (&t[..i], t[i + 1..].parse::<i32>().map_err(|_| syntax())?),
            None => (t, 0),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() && frac.is_empty()
            || !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit())
        {
            return Err(syntax());
        }
        let all = format!("{int}{frac}");
        let all = all.trim_start_matches('0');
        let trimmed = all.trim_end_matches('0');
        let exponent = i64::from(exp) - frac.len() as i64 + (all.len() - trimmed.len()) as i64;
        if trimmed.is_empty() {
            return Ok(Decimal::ZERO);
        }
        if trimmed.len() > MAX_DIGITS as usize {
            return Err(NumberError::Precision);
        }
        let mantissa: i128 = trimmed.parse().map_err(|_| syntax())?;
        let exponent = i32::try_from(exponent).map_err(|_| NumberError::Range)?;
        Decimal::new(if negative { -mantissa } else { mantissa }, exponent)
    }
}

impl fmt::Display for Decimal {
    /// Plain decimal text, as DynamoDB returns numbers: no exponent, no
    /// trailing zeros (`9223372036854775808`, `-0.05`, `1200`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mantissa < 0 {
            f.write_str("-")?;
        }
        let digits = self.mantissa.unsigned_abs().to_string();
        if self.exponent >= 0 {
            f.write_str(&digits)?;
            for _ in 0..self.exponent {
                f.write_str("0")?;
            }
            return Ok(());
        }
        let point = digits.len() as i64 + i64::from(self.exponent);
        if point > 0 {
            let (int, frac) = digits.split_at(point as usize);
            write!(f, "{int}.{frac}")
        } else {
            f.write_str("0.")?;
            for _ in 0..-point {
                f.write_str("0")?;
            }
            f.write_str(&digits)
        }
    }
}

/// DynamoDB's size of an item: the sum of its attributes' names (UTF-8
/// bytes) and values ([`AttrValue::size`]), as "DynamoDB item sizes and
/// formats" gives it
/// (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>).
/// The library's one item-size rule: the record's size check
/// ([`crate::store::Record::item_size`]) and the request-unit bill of the test
/// tooling both size items with it.
pub fn item_size(item: &HashMap<String, AttrValue>) -> usize {
    item.iter().map(|(name, v)| name.len() + v.size()).sum()
}

/// DynamoDB's size of a number given as decimal text: "(1 byte per two
/// significant digits) + (1 byte)", leading and trailing zeroes trimmed
/// (the page above; a half byte counts as one).
pub fn number_size(n: &str) -> usize {
    let mantissa = n.split(['e', 'E']).next().unwrap_or(n);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
    significant.max(1).div_ceil(2) + 1
}

impl AttrValue {
    /// DynamoDB's size of this value without its name: strings their UTF-8
    /// bytes, numbers [`number_size`], binary its raw bytes, null and
    /// booleans 1 byte, a list or map 3 bytes plus 1 byte and the size of
    /// each element (a map's element with its name), a set the sum of its
    /// members.
    pub fn size(&self) -> usize {
        match self {
            AttrValue::S(s) => s.len(),
            AttrValue::N(n) => number_size(n),
            AttrValue::B(b) => b.len(),
            AttrValue::Bool(_) | AttrValue::Null => 1,
            AttrValue::L(l) => 3 + l.iter().map(|v| 1 + v.size()).sum::<usize>(),
            AttrValue::M(m) => 3 + m.iter().map(|(k, v)| 1 + k.len() + v.size()).sum::<usize>(),
            AttrValue::Ss(ss) => ss.iter().map(String::len).sum(),
            AttrValue::Ns(ns) => ns.iter().map(|n| number_size(n)).sum(),
            AttrValue::Bs(bs) => bs.iter().map(Vec::len).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented rules, each able to fail on its own.
    #[test]
    fn sizes_follow_dynamodbs_item_size_rules() {
        // Strings: UTF-8 bytes (3 bytes for this one character).
        assert_eq!(AttrValue::s("\u{20ac}").size(), 3);
        // Numbers: 1 byte per two significant digits, plus 1; zeroes trimmed.
        assert_eq!(number_size("7"), 2);
        assert_eq!(number_size("12"), 2);
        assert_eq!(number_size("123"), 3);
        assert_eq!(number_size("1700000000"), 2);
        assert_eq!(number_size("-0.00125"), 3);
        assert_eq!(number_size("1795950000250"), 7);
        // Binary: raw bytes; null and booleans 1 byte.
        assert_eq!(AttrValue::B(vec![0; 10]).size(), 10);
        assert_eq!(AttrValue::Null.size(), 1);
        assert_eq!(AttrValue::Bool(false).size(), 1);
        // Lists and maps: 3 bytes, plus 1 byte per element.
        assert_eq!(AttrValue::L(vec![]).size(), 3);
        assert_eq!(
            AttrValue::L(vec![AttrValue::s("ab"), AttrValue::Null]).size(),
            3 + 3 + 2
        );
        let m = AttrValue::M(HashMap::from([("k".to_owned(), AttrValue::s("vv"))]));
        assert_eq!(m.size(), 3 + 1 + 1 + 2);
        // An item: names and values.
        let item = HashMap::from([
            ("id".to_owned(), AttrValue::s("abc")),
            ("n".to_owned(), AttrValue::n(12)),
        ]);
        assert_eq!(item_size(&item), 2 + 3 + 1 + 2);
    }

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_prints_canonically() {
        for (text, canonical) in [
            ("0", "0"),
            ("-0.000", "0"),
            ("007", "7"),
            ("12.50", "12.5"),
            ("-0.05", "-0.05"),
            ("1E+3", "1000"),
            ("1.5e-2", "0.015"),
            ("+42", "42"),
            (".5", "0.5"),
            ("5.", "5"),
            (
                "99999999999999999999999999999999999999",
                "99999999999999999999999999999999999999",
            ),
        ] {
            assert_eq!(d(text).to_string(), canonical, "{text}");
        }
        for bad in ["", "-", ".", "1.2.3", "abc", "1e", "0x10", "1 2", "--1"] {
            assert!(
                matches!(bad.parse::<Decimal>(), Err(NumberError::Syntax(_))),
                "{bad}"
            );
        }
        assert_eq!(
            "123456789012345678901234567890123456789".parse::<Decimal>(),
            Err(NumberError::Precision)
        );
        assert_eq!("1E+126".parse::<Decimal>(), Err(NumberError::Range));
        assert_eq!("1E-131".parse::<Decimal>(), Err(NumberError::Range));
        assert!(
            "9.9999999999999999999999999999999999999E+125"
                .parse::<Decimal>()
                .is_ok()
        );
    }

    #[test]
    fn adds_exactly_past_i64() {
        let sum = d("1").checked_add(Decimal::from(i64::MAX)).unwrap();
        assert_eq!(sum.to_string(), "9223372036854775808");
        assert_eq!(
            d("0.1").checked_add(d("0.2")).unwrap().to_string(),
            "0.3",
            "no binary rounding"
        );
        assert_eq!(d("5").checked_add(d("-5")).unwrap(), Decimal::ZERO);
        assert_eq!(
            d("-1.5").checked_add(d("0.25")).unwrap().to_string(),
            "-1.25"
        );
        assert_eq!(
            d("1E+20").checked_add(d("1")).unwrap().to_string(),
            "100000000000000000001"
        );
        // 39 significant digits: refused, as DynamoDB refuses it.
        assert_eq!(
            d("99999999999999999999999999999999999999").checked_add(d("1")),
            Ok(d("1E+38"))
        );
        assert_eq!(d("1E+38").checked_add(d("1")), Err(NumberError::Precision));
        assert_eq!(
            d("1E+100").checked_add(d("1E-100")),
            Err(NumberError::Precision)
        );
        // Operands whose alignment leaves i128 still sum exactly.
        assert_eq!(
            d("1.71E+38")
                .checked_add(d("-80000000000000000000000000000000000001"))
                .unwrap()
                .to_string(),
            "90999999999999999999999999999999999999"
        );
        assert_eq!(
            d("2E+38").checked_add(d("-99999999999999999999999999999999999999")),
            Err(NumberError::Precision)
        );
    }

    #[test]
    fn compares_exactly_not_through_f64() {
        assert!(d("9007199254740992") < d("9007199254740993"));
        assert_eq!(9007199254740992f64, 9007199254740993f64, "f64 cannot tell");
        assert!(d("12.5") == d("12.50"));
        assert!(d("-2") < d("-1.5"));
        assert!(d("-0.001") < d("0"));
        assert!(d("0.001") > d("0"));
        assert!(d("1E+3") > d("999.999"));
        assert!(d("100") > d("99"));
        assert!(d("-100") < d("-99"));
        assert!(d("99999999999999999999999999999999999999") < d("1E+38"));
    }
}
