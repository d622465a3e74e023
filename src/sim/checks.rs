//! The checks every simulator setting gets, with errors that name the flag or variable the user
//! set. Changes when a new kind of check is needed.

pub fn config_error(var: &str, message: impl Into<String>) -> crate::Error {
    crate::Error::config(var, message)
}

pub fn positive(name: &str, v: f64) -> crate::Result<()> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(config_error(
            name,
            format!("must be a positive number, got {v}"),
        ))
    }
}

pub fn non_negative(name: &str, v: f64) -> crate::Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(config_error(name, format!("must be zero or more, got {v}")))
    }
}
