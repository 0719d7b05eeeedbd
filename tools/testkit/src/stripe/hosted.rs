//! The hosted Checkout page, `GET /c/pay/{session}` and its Pay button. It shows the
//! session's own line items and total, in the session's `locale` where the sandbox has the
//! words (en, fr, de, es, it, zh: simplified Chinese; `auto` reads `Accept-Language`; English
//! otherwise). Paying
//! charges the stored `amount_total` — nothing in the URL or the form is read — and
//! redirects (303) to the `success_url` with `{CHECKOUT_SESSION_ID}` filled in
//! (<https://docs.stripe.com/payments/checkout/custom-success-page>). "After it expires, a
//! customer can't complete a Checkout Session and customers loading the Checkout Session see
//! a message saying the Checkout Session is expired"
//! (<https://docs.stripe.com/api/checkout/sessions/expire>): 410 here. A `cancel_url` shows a
//! back link ("If set, Checkout displays a back button"). A completed session
//! cannot be paid twice: pressing Pay again only redirects.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use super::state::{Session, SessionStatus, format_amount};

/// The words of one language.
pub(crate) struct Words {
    pub lang: &'static str,
    pub pay: &'static str,
    pub expired: &'static str,
    pub complete: &'static str,
    pub missing: &'static str,
    pub back: &'static str,
    pub decimal_comma: bool,
}

const WORDS: &[Words] = &[
    Words {
        lang: "en",
        pay: "Pay",
        expired: "This Checkout Session has expired.",
        complete: "This Checkout Session is already complete.",
        missing: "Something went wrong: this page does not exist.",
        back: "Back",
        decimal_comma: false,
    },
    Words {
        lang: "fr",
        pay: "Payer",
        expired: "Cette session de paiement a expiré.",
        complete: "Cette session de paiement est déjà terminée.",
        missing: "Une erreur s'est produite : cette page n'existe pas.",
        back: "Retour",
        decimal_comma: true,
    },
    Words {
        lang: "de",
        pay: "Bezahlen",
        expired: "Diese Checkout-Sitzung ist abgelaufen.",
        complete: "Diese Checkout-Sitzung ist bereits abgeschlossen.",
        missing: "Etwas ist schiefgelaufen: Diese Seite existiert nicht.",
        back: "Zurück",
        decimal_comma: true,
    },
    Words {
        lang: "es",
        pay: "Pagar",
        expired: "Esta sesión de pago ha caducado.",
        complete: "Esta sesión de pago ya se ha completado.",
        missing: "Algo ha fallado: esta página no existe.",
        back: "Volver",
        decimal_comma: true,
    },
    Words {
        lang: "it",
        pay: "Paga",
        expired: "Questa sessione di pagamento è scaduta.",
        complete: "Questa sessione di pagamento è già stata completata.",
        missing: "Qualcosa è andato storto: questa pagina non esiste.",
        back: "Indietro",
        decimal_comma: true,
    },
    Words {
        lang: "zh",
        pay: "支付",
        expired: "此结账会话已过期。",
        complete: "此结账会话已完成。",
        missing: "出错了：此页面不存在。",
        back: "返回",
        decimal_comma: false,
    },
];

/// The words for a session's `locale` (`auto` or none: the browser's first language).
pub(crate) fn words(locale: Option<&str>, accept_language: Option<&str>) -> &'static Words {
    let wanted = match locale {
        Some(l) if l != "auto" => l.to_owned(),
        _ => accept_language
            .and_then(|a| a.split(',').next())
            .map(|t| t.split(';').next().unwrap_or("").trim().to_owned())
            .unwrap_or_default(),
    };
    let base = wanted.split('-').next().unwrap_or("").to_ascii_lowercase();
    WORDS.iter().find(|w| w.lang == base).unwrap_or(&WORDS[0])
}

pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

pub(crate) fn page(status: u16, lang: &str, body: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", "text/html; charset=utf-8")
        .header("cache-control", "no-store")
        .body(Full::new(Bytes::from(format!(
            "<!doctype html><html lang={lang}><meta charset=utf-8>\
             <title>Checkout (Stripe sandbox)</title>\
             <body style=\"font-family:sans-serif;max-width:30em;margin:3em auto\">{body}</body></html>"
        ))))
        .expect("a valid response")
}

pub(crate) fn redirect(location: &str) -> Response<Full<Bytes>> {
    Response::builder()
        .status(303)
        .header("location", location)
        .body(Full::new(Bytes::new()))
        .expect("a valid response")
}

/// The page for `session`: its items, its total and the Pay button while it is open.
pub(crate) fn checkout(session: &Session, w: &Words) -> (u16, String) {
    let total = format_amount(session.amount_total, &session.currency, w.decimal_comma);
    match session.status {
        SessionStatus::Expired => (410, format!("<h1 id=expired>{}</h1>", w.expired)),
        SessionStatus::Complete => (200, format!("<h1 id=done>{}</h1>", w.complete)),
        SessionStatus::Open => {
            let items: String = session
                .line_items
                .iter()
                .map(|l| {
                    format!(
                        "<li>{}{} × {} — {}</li>",
                        escape(&l.name),
                        l.description
                            .as_deref()
                            .map_or(String::new(), |d| format!(" <small>{}</small>", escape(d))),
                        l.quantity,
                        format_amount(l.unit_amount * l.quantity, &l.currency, w.decimal_comma)
                    )
                })
                .collect();
            (
                200,
                format!(
                    "<h1 id=total data-amount={amount} data-currency={cur}>{total}</h1>\
                     <ul>{items}</ul><p>Stripe sandbox: nobody is charged.</p>\
                     <form method=post action=/c/pay/{id}>\
                     <button id=pay type=submit>{pay} {total}</button></form>{back}",
                    back = session
                        .cancel_url
                        .as_deref()
                        .map_or(String::new(), |u| format!(
                            "<p><a id=cancel href=\"{}\">{}</a></p>",
                            escape(u),
                            w.back
                        )),
                    amount = session.amount_total,
                    cur = session.currency,
                    id = session.id,
                    pay = w.pay,
                ),
            )
        }
    }
}

/// `success_url` with the session id in place of `{CHECKOUT_SESSION_ID}`.
pub(crate) fn success_location(session: &Session) -> String {
    session
        .success_url
        .replace("{CHECKOUT_SESSION_ID}", &session.id)
}
