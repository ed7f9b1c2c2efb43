//! The certificates the egress suite's HTTPS server presents for `*.badtls.test`, made at run
//! time (never downloaded, never kept): a CA of the run's own, which the suite's exits trust,
//! and under it certificates that must each be refused by the exit's `tls_certificate` rule.
//!
//! | name (SNI) | what is presented |
//! | --- | --- |
//! | `expired.badtls.test` | signed by the run's CA, valid 2020-2021 |
//! | `notyet.badtls.test` | signed by the run's CA, valid from 2099 |
//! | `selfsigned.badtls.test` | self-signed, so no trusted issuer |
//! | `othername.badtls.test` | signed by the run's CA, for `elsewhere.test` only |
//! | any other name | the suite's `secure.test` certificate (so `wrongname.badtls.test` gets a
//! |  | valid certificate for another name) |
//!
//! Refuses: nothing; a failure to make a certificate is an error the suite reports as setup.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, date_time_ymd};

use super::server::TlsIdentity;

/// The run's CA certificate (DER) and the server identities by SNI name.
pub struct Hostile {
    pub ca_der: Vec<u8>,
    pub by_name: Vec<(String, TlsIdentity)>,
}

enum Shape {
    Expired,
    NotYet,
    SelfSigned,
    OtherName,
}

/// Makes the CA and one certificate per shape.
pub fn make() -> Result<Hostile, String> {
    let fail = |what: &str, e: rcgen::Error| format!("{what}: {e}");
    let ca_key = KeyPair::generate().map_err(|e| fail("CA key", e))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| fail("CA params", e))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "toolgate egress suite run CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_der = ca_params
        .self_signed(&ca_key)
        .map_err(|e| fail("CA certificate", e))?
        .der()
        .to_vec();
    let issuer = Issuer::from_params(&ca_params, &ca_key);
    let shapes = [
        ("expired.badtls.test", Shape::Expired),
        ("notyet.badtls.test", Shape::NotYet),
        ("selfsigned.badtls.test", Shape::SelfSigned),
        ("othername.badtls.test", Shape::OtherName),
    ];
    let mut by_name = Vec::new();
    for (name, shape) in shapes {
        let key = KeyPair::generate().map_err(|e| fail(name, e))?;
        let san = match shape {
            Shape::OtherName => "elsewhere.test",
            Shape::Expired | Shape::NotYet | Shape::SelfSigned => name,
        };
        let mut params =
            CertificateParams::new(vec![san.to_string()]).map_err(|e| fail(name, e))?;
        params.distinguished_name.push(DnType::CommonName, san);
        match shape {
            Shape::Expired => {
                params.not_before = date_time_ymd(2020, 1, 1);
                params.not_after = date_time_ymd(2021, 1, 1);
            }
            Shape::NotYet => {
                params.not_before = date_time_ymd(2099, 1, 1);
                params.not_after = date_time_ymd(2100, 1, 1);
            }
            Shape::SelfSigned | Shape::OtherName => {}
        }
        let cert = match shape {
            Shape::SelfSigned => params.self_signed(&key),
            Shape::Expired | Shape::NotYet | Shape::OtherName => params.signed_by(&key, &issuer),
        }
        .map_err(|e| fail(name, e))?;
        by_name.push((
            name.to_string(),
            TlsIdentity {
                cert_der: cert.der().to_vec(),
                key_pkcs8_der: key.serialize_der(),
            },
        ));
    }
    Ok(Hostile { ca_der, by_name })
}
