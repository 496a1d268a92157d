//! Names that hold a credential, and URLs that carry one in a parameter. A registration
//! never holds a literal credential (digest §6) and an event's MCP descriptor or
//! `source` never carries one (§3.2, §3.3): the component asks these of both, and the
//! host of the `source` it is told to stamp (`ahp hook --source`), so that a name
//! refused in one is refused in the others, spelled the same way. Unit-tested with the
//! component's other syntax predicates (`guest/src/syntax/secret.rs`).

/// Names that would hold a credential in the clear, compared [`normalized`]
/// (`client_secret`, `Access-Token`, `API_KEY`). A registration names where a secret
/// lives (`tokenEnv`, `tokenRef`, `clientSecretRef`), never the secret itself; a longer
/// name (`tokenEnv`, `tokenEndpoint`) is another name.
pub const SECRET_NAMES: &str = "token bearertoken secret clientsecret password \
    accesstoken apikey privatekey refreshtoken idtoken authorization bearer cookie \
    credential credentials auth";

/// A portable environment-variable name, `^[A-Za-z_][A-Za-z0-9_]*$` (POSIX.1-2017 §8.1,
/// relaxed to either case): what an `env:` reference or a bearer `tokenEnv` names, in a
/// registration and in the host's own files and flags alike. Anything else there is
/// refused without being repeated, as it may be the secret itself, pasted in its place.
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|ch| ch.is_ascii_alphabetic() || ch == '_')
        && chars.all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
}

/// Whether `name` is one of [`SECRET_NAMES`], however it is spelled.
pub fn is_secret_name(name: &str) -> bool {
    let name = normalized(name);
    SECRET_NAMES.split_whitespace().any(|s| s == name)
}

/// `name` lowercased, `_` and `-` left out: how secret names are compared.
pub fn normalized(name: &str) -> String {
    name.chars()
        .filter(|ch| !matches!(ch, '_' | '-'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// Whether a URL's query or fragment has a parameter with a value whose name says it is
/// a credential (`?access_token=…`, `#api-key=…`, `?X-Amz-Security-Token=…`): one
/// written into the URL, which travels in every request line, log and copy of it.
/// Parameters are split at `&` and at `;` (which some servers still read as one), and a
/// name is percent-decoded before it is compared (`access%5Ftoken`), against more names
/// than a member's (`names_a_credential`). Ordinary parameters (`?tenant=a`,
/// `?page_token=…`) and a fragment that is an anchor (`#auth`) are no secret. A name is
/// also read after a `?` or `#` inside a parameter, where a value holds a URL of its own
/// (`?redirect=https://b/x?token=…`).
pub fn has_a_secret_parameter(url: &str) -> bool {
    url.find(['?', '#'])
        .is_some_and(|at| parameters_name_a_secret(&url[at..]))
}

/// Whether `parameters`, a URL's text from the `?` or `#` that starts its query or
/// fragment, has a parameter named as a credential ([`has_a_secret_parameter`]): split
/// at `&` and `;`, each part's names read from its start and after each `?` or `#` in
/// it, each name's value running to the part's end, but a query's to the fragment.
fn parameters_name_a_secret(parameters: &str) -> bool {
    // A query's values end at the fragment (`?api_key=#usage` gives none).
    let fragment = match parameters.starts_with('?') {
        true => parameters.find('#').unwrap_or(parameters.len()),
        false => 0,
    };
    let mut part_at = 1;
    parameters[1..].split(['&', ';']).any(|part| {
        let (start, end) = (part_at, part_at + part.len());
        part_at = end + 1;
        let mut named_at = start;
        part.split(['?', '#']).any(|named| {
            let at = named_at;
            named_at += named.len() + 1;
            named.split_once('=').is_some_and(|(name, _)| {
                let value = at + name.len() + 1;
                let value_end = match value <= fragment && fragment < end {
                    true => fragment,
                    false => end,
                };
                value < value_end && names_a_credential(&percent_decoded(name))
            })
        })
    })
}

/// Whether a parameter's `name` says its value is a credential: a secret name; one
/// ending in a word only credentials end in (`private_token`, `api_secret`,
/// `subscription-key`, `X-Amz-Signature`, `auth_key`), but for the paging cursors named
/// like tokens (`page_token`) and the name of one that exists (`existingSecret`); or one of the short names services use (Azure's `sig`,
/// Google's `key`, a personal access token's `pat`, a `jwt`). A name merely holding such a word
/// (`max_tokens`, `signature_version`) is not: for that, see [`mentions_a_credential`].
pub fn names_a_credential(name: &str) -> bool {
    const ENDINGS: [&str; 16] = [
        "token",
        "secret",
        "password",
        "passwd",
        "pwd",
        "apikey",
        "accesskey",
        "secretkey",
        "privatekey",
        "subscriptionkey",
        "signature",
        // DeepL's `auth_key`, Datadog's `application_key`, and the like.
        "authkey",
        "appkey",
        "applicationkey",
        "licensekey",
        "masterkey",
    ];
    const CURSORS: [&str; 5] = [
        "pagetoken",
        "nexttoken",
        "continuationtoken",
        "synctoken",
        "resumptiontoken",
    ];
    const SHORT: [&str; 7] = [
        "key",
        "sig",
        "pwd",
        "pat",
        "jwt",
        "xamzcredential",
        "xgoogcredential",
    ];
    let name = normalized(name);
    // The name of a secret that exists elsewhere (helm's `existingSecret`).
    if CURSORS.contains(&name.as_str()) || name.contains("existingsecret") {
        return false;
    }
    is_secret_name(&name)
        || SHORT.contains(&name.as_str())
        || ENDINGS.iter().any(|ending| name.ends_with(ending))
}

/// Words only a credential's name holds, [`normalized`]. Not `auth` alone, which would
/// take `author` too.
const CREDENTIAL_WORDS: [&str; 10] = [
    "token",
    "secret",
    "key",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "cookie",
    "authorization",
    "bearer",
];

/// Whether `name`, [`normalized`], holds a word only a credential's name holds anywhere
/// in it (`GITHUB_TOKEN`, `client_secret_value`, `X-Api-Key`, `Proxy-Authorization`,
/// `gpg-passphrase`). Wider than [`names_a_credential`], and so asked only where a
/// credential is expected: of the `name` or `key` beside a `value`, and of a credential
/// binding's member whose name ends in `value` (`client_secret_value`).
pub fn mentions_a_credential(name: &str) -> bool {
    let name = normalized(name);
    CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
}

/// Whether `name`, [`normalized`], ends in such a word, or its plural
/// (`proxyAuthorization`, `signingKey`, `sessionCookie`, `basicCredentials`): named as
/// the thing itself, not as a setting about it (`tokenType`, `keyId`, `bearerFormat`).
/// Asked of a member of a credential binding (`authentication`).
pub fn ends_in_a_credential_word(name: &str) -> bool {
    let name = normalized(name);
    let singular = name.strip_suffix('s').unwrap_or(&name);
    CREDENTIAL_WORDS.iter().any(|word| singular.ends_with(word))
}

/// Compounds services spell as one word (`APIKEY`), counted as [`CREDENTIAL_WORDS`] are
/// by [`holds_a_credential_word`].
const COMPOUND_CREDENTIAL_WORDS: [&str; 5] =
    ["apikey", "accesskey", "secretkey", "privatekey", "authkey"];

/// Words after a credential's word that make the name a setting about it, not the
/// credential (`TOKEN_URL`, `key-file`, `api_key_env`, `token-limit`, `cookie-jar`,
/// `PASSWORD_MIN_LENGTH`, ssh's `StrictHostKeyChecking`), plural too (ssh's
/// `HostKeyAlgorithms`, `PubkeyAcceptedKeyTypes`). Any other word may follow
/// (`SECRET_KEY_BASE`, `OPENAI_API_KEY_PROD`, `HF_TOKEN_WRITE`, `API_KEY_2`).
const SETTING_WORDS: [&str; 61] = [
    "url",
    "uri",
    "endpoint",
    "id",
    "name",
    "file",
    "path",
    "env",
    "ref",
    "type",
    "header",
    "dir",
    "host",
    "port",
    "format",
    "limit",
    "jar",
    "domain",
    "length",
    "prefix",
    "size",
    "budget",
    "store",
    "arn",
    "count",
    "ttl",
    "timeout",
    "version",
    "expiry",
    "expires",
    "expire",
    "audience",
    "issuer",
    "scope",
    "secure",
    "samesite",
    "age",
    "interval",
    "policy",
    "algorithm",
    "bits",
    "required",
    "validation",
    "helper",
    "minutes",
    "seconds",
    "days",
    "rotation",
    "backend",
    "httponly",
    "bindings",
    "mode",
    "provider",
    "source",
    "manager",
    "browser",
    "stdin",
    "lifetime",
    "checking",
    "validity",
    "alias",
];

/// Words before `key` that make it a data key, not a credential (`sort-key`,
/// `PRIMARY_KEY`, `--object-key`).
const DATA_KEY_WORDS: [&str; 17] = [
    "sort",
    "primary",
    "partition",
    "cache",
    "foreign",
    "routing",
    "shard",
    "lookup",
    "index",
    "unique",
    "composite",
    "hash",
    "range",
    "object",
    "idempotency",
    "public",
    "publishable",
];

/// Whether `name`, split into words (at anything but a letter or digit, and where a
/// lower-case letter or digit meets an upper-case one), holds a credential's word whole
/// ([`CREDENTIAL_WORDS`], [`COMPOUND_CREDENTIAL_WORDS`]) that no setting word follows
/// ([`SETTING_WORDS`]), that is no data key ([`DATA_KEY_WORDS`]), in a name of no secret
/// kept elsewhere (`existing` or `image pull` before `secret`, a key path's
/// `pullSecrets`): `SECRET_KEY_BASE`, `STRIPE_SECRET_KEY_LIVE`, `API_KEY_2`, `openaiKey`;
/// not `KEYCLOAK_URL`, `TOKEN_FILE`, `token-limit`, `cookie-jar`, `max_tokens`,
/// `sort-key`, `existingSecret` or `tokenizers`.
pub fn holds_a_credential_word(name: &str) -> bool {
    let words = words_of(name);
    // A plural too (`basicCredentials`, `API_TOKENS`), but for a count of tokens
    // (`MAX_TOKENS`: [`names_a_count_or_data_key`]).
    if names_a_count_or_data_key(name) {
        return false;
    }
    let Some(at) = words.iter().rposition(|word| is_a_credential_word(word)) else {
        return false;
    };
    let setting = words[at + 1..].iter().any(|word| {
        let singular = word.strip_suffix('s').unwrap_or(word);
        SETTING_WORDS.contains(&word.as_str()) || SETTING_WORDS.contains(&singular)
    });
    let before = at.checked_sub(1).map(|before| words[before].as_str());
    let data_key = matches!(words[at].as_str(), "key" | "keys")
        && before.is_some_and(|before| DATA_KEY_WORDS.contains(&before));
    // The name of a secret kept elsewhere (helm's `existingSecret`,
    // `existingSecretPasswordKey`, `imagePullSecrets`).
    // Looked at once, not at each `pull` (a name of a hundred thousand).
    let a_key_path_s_pull_secrets = name.contains("pullSecrets") && name.contains(['.', '[']);
    let elsewhere = words.windows(2).enumerate().any(|(at, pair)| {
        let kept = match pair[0].as_str() {
            "existing" => true,
            // Kubernetes' `imagePullSecrets` and helm's `global.pullSecrets[0]` (a key's
            // path), not any `PULL_SECRETS` (a docker config).
            "pull" => {
                at.checked_sub(1)
                    .is_some_and(|before| words[before] == "image")
                    || a_key_path_s_pull_secrets
            }
            _ => false,
        };
        kept && matches!(pair[1].as_str(), "secret" | "secrets")
    });
    !setting && !data_key && !elsewhere
}

/// Words before `tokens` that make the name a count of them (`MAX_TOKENS`,
/// `prompt_tokens`), not credentials.
const COUNT_WORDS: [&str; 10] = [
    "max",
    "min",
    "num",
    "total",
    "prompt",
    "completion",
    "context",
    "input",
    "output",
    "used",
];

/// Whether `name` names a count of tokens (`MAX_TOKENS`, `max_new_tokens`,
/// `tokensPerMinute`) or ends in a data key (`SORT_KEY`, `--object-key`): what holds a
/// credential's word without naming one.
pub fn names_a_count_or_data_key(name: &str) -> bool {
    let words = words_of(name);
    let Some((last, earlier)) = words.split_last() else {
        return false;
    };
    let before = earlier.last().map(String::as_str).unwrap_or_default();
    counts_tokens(&words)
        || (matches!(last.as_str(), "key" | "keys") && DATA_KEY_WORDS.contains(&before))
}

/// Whether `words`, a name's, name a count of tokens: `tokens` last after a count word
/// anywhere before it (`MAX_TOKENS`, `max_new_tokens`, `TOTAL_ACCESS_TOKENS`), or a rate
/// (`tokensPerMinute`).
fn counts_tokens(words: &[String]) -> bool {
    let Some((last, earlier)) = words.split_last() else {
        return false;
    };
    let counted = earlier
        .iter()
        .any(|word| COUNT_WORDS.contains(&word.as_str()));
    let a_rate = words
        .windows(2)
        .any(|pair| pair[0] == "tokens" && pair[1] == "per");
    (last == "tokens" && counted) || a_rate
}

/// `name`'s words, lower-cased: split at anything but a letter or digit, and where a
/// lower-case letter or digit meets an upper-case letter (`apiKey`, `X-Api-Key`).
fn words_of(name: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut previous: Option<char> = None;
    for ch in name.chars() {
        let joins = ch.is_alphanumeric()
            && !(ch.is_uppercase() && previous.is_some_and(|p| p.is_lowercase() || p.is_numeric()));
        if !joins && !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
        if ch.is_alphanumeric() {
            word.extend(ch.to_lowercase());
        }
        previous = Some(ch);
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// Whether a program's argument gives a credential literally: an option named as a
/// credential ([`is_a_credential_option`]) with its value after `=` (`--api-key=…`,
/// `-token=…`, `--authtoken=…`), but for a path (`--key=/etc/ahp/key.pem`,
/// `--key=certs/client.pem`) and for an authentication method's name (`--auth=none`);
/// a user's password after a user's or an authentication option
/// ([`gives_a_users_password`]); a credential header, as the argument or an option's
/// value ([`is_a_credential_header`]); an `Authorization`, `Cookie` or `Bearer`
/// credential anywhere in it, a script's included ([`holds_a_credential_header`]); a
/// variable or a configuration key named as a credential set to a value, alone or in a
/// comma-separated list ([`sets_a_credential`]); or openssl's literal password
/// (`pass:…`). The value is never repeated by a caller.
pub fn argument_gives_a_credential(arg: &str) -> bool {
    let value = arg.split_once('=').map(|(_, value)| value);
    is_a_credential_header(arg)
        || value.is_some_and(is_a_credential_header)
        || holds_a_credential_header(arg)
        || sets_a_credential(arg)
        || value.is_some_and(sets_a_credential)
        // helm's and spark's lists (`--set=a=b,auth.rootPassword=…`): each of its keys.
        || arg.split(',').skip(1).any(sets_a_credential)
        || value.is_some_and(|value| value.split(',').any(sets_a_credential))
        || arg
            .strip_prefix("pass:")
            .is_some_and(|password| !password.is_empty() && !an_expansion(password))
        || arg.split_once('=').is_some_and(|(option, value)| {
            (is_a_credential_option(option) && gives_a_secret(option, value))
                || gives_a_users_password(option, value)
                || (option.starts_with('-')
                    && mentions_a_credential_word(option)
                    && looks_secret_after(option, value))
        })
}

/// Whether `text` sets a variable or a configuration key named as a credential to a
/// value, as `env` and `docker -e` take a variable (`GITHUB_TOKEN=ghp_…`,
/// `--env=OPENAI_API_KEY=sk-…`) and npm, helm or spark a key
/// (`//registry.npmjs.org/:_authToken=…`, `auth.rootPassword=…`,
/// `spark.hadoop.fs.s3a.secret.key=…`).
fn sets_a_credential(text: &str) -> bool {
    let named = |name: &str| names_a_credential(name) || holds_a_credential_word(name);
    text.split_once('=').is_some_and(|(name, value)| {
        let setting = match is_env_name(name) {
            true => named(name),
            false => configuration_key_s_own_name(name).is_some_and(named) && named(name),
        };
        // A count is a number: a run of a token's characters with a secret's look under a
        // count's name is a token misnamed (`TOTAL_ACCESS_TOKENS=<40 hex digits>`, a UUID,
        // base64, a JWT), not a variable's expansion, a path or a model's name
        // (`${LLM_MAX_TOKENS_V2}`, `meta-llama/Llama-3.1-8B`).
        let a_run = value.starts_with("eyJ")
            || value
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_-+=".contains(ch));
        (setting && may_be_secret(value))
            || (counts_tokens(&words_of(name)) && a_run && looks_secret(value))
    })
}

/// The last segment of a configuration key's path but for an index (`rootPassword` of
/// `auth.rootPassword`, `_authToken` of `//registry.npmjs.org/:_authToken`, `token` of
/// `servers[0].token`, `passwords` of `auth.passwords[0]`), which names what it sets
/// (`credential.username` sets a name): `None` for an option or a name of other
/// characters than letters, digits and `.`, `_`, `:`, `/`, `[`, `]`, `-`.
fn configuration_key_s_own_name(name: &str) -> Option<&str> {
    let a_key = !name.starts_with('-')
        && name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "._:/[]-".contains(ch));
    let last = name
        .rsplit(['.', '/', ':', '[', ']'])
        .find(|segment| !segment.is_empty() && !segment.bytes().all(|b| b.is_ascii_digit()));
    last.filter(|_| a_key)
}

/// Whether `value`, an option's, is a user's name and password (`alice:s3cret`): after
/// an authentication option (`--basic-auth`, `--http-auth`, `--proxy-creds`), any; after
/// a user's option (`-u`, `--user`, `-U`, `--proxy-user`) or one naming authentication
/// before words naming a user's credentials or a method (`--auth-basic`, `--auth-user`,
/// `--auth-http`; not `--auth-host`, whose `host:port` is none), one that is no group,
/// identity or path (docker's `-u 1000:1000`, `node:node`, `app:staff`; kubectl's
/// `--user arn:aws:eks:…` and `system:serviceaccount:…`): a password not all digits,
/// not the user's name, mixing letters and digits or holding other characters. Never a
/// password that is an expansion.
fn gives_a_users_password(option: &str, value: &str) -> bool {
    let Some((user, password)) = value.split_once(':') else {
        return false;
    };
    if user.is_empty() || password.is_empty() || password.starts_with("//") {
        return false;
    }
    let words = words_of(option.trim_start_matches('-'));
    let authentication = |word: &String| matches!(word.as_str(), "auth" | "creds");
    let an_option = option.starts_with('-');
    let authenticates = an_option && words.last().is_some_and(authentication);
    // `auth` before words naming a user's credentials or a method (`--auth-basic`,
    // `--auth-user`, `--auth-http`, `--auth-digest`), not where or how (`--auth-host`,
    // `--auth-config=file:…`, `--auth-scopes=read:org`).
    let of_a_user = |word: &String| {
        matches!(
            word.as_str(),
            "basic"
                | "user"
                | "users"
                | "userpass"
                | "login"
                | "credentials"
                | "creds"
                | "pass"
                | "password"
                | "info"
                | "string"
                | "proxy"
        )
    };
    let names_authentication = an_option
        && words.iter().rposition(authentication).is_some_and(|at| {
            let after = &words[at + 1..];
            !after.is_empty()
                && after
                    .iter()
                    .all(|word| of_a_user(word) || names_a_method(word) || word == "http")
        })
        && !password.starts_with(['/', '\\']);
    let takes_a_user = matches!(option, "-u" | "-U" | "--user" | "--proxy-user");
    let plain = |ch: char| ch.is_ascii_lowercase() || ch.is_ascii_digit() || "_-".contains(ch);
    let mixed = password.chars().any(|ch| ch.is_ascii_digit())
        && password.chars().any(|ch| ch.is_alphabetic());
    let an_identity = (user == "arn" && password.starts_with("aws"))
        || (matches!(user, "system" | "urn") && password.contains(':'));
    let a_password = !an_identity
        && !password.chars().all(|ch| ch.is_ascii_digit())
        && password != user
        && (mixed || !password.chars().all(plain));
    !an_expansion(password)
        && (authenticates || ((takes_a_user || names_authentication) && a_password))
}

/// Whether `value` is only a shell expansion of a variable (`$GITHUB_TOKEN`,
/// `${AUTH_HEADER}`), quoted or not, maybe after an authentication scheme (`Bearer
/// $TOKEN`): the secret is read where it runs, not written here.
fn an_expansion(value: &str) -> bool {
    let mut words = value.split_whitespace();
    let first = words.next().unwrap_or_default();
    let word = match names_a_method(first.trim_matches(['"', '\''])) {
        true => words.next().unwrap_or_default(),
        false => first,
    };
    // The whole value, and a variable's name as they are written, in capitals: a
    // program started without a shell gets `$ecret1` as it is, a password. A shell's
    // `$`, not cmd's `%NAME%`.
    let word = word.trim_matches(['"', '\'']);
    let expanded = word.starts_with('$')
        && leading_expansion(word)
            .is_some_and(|(name, rest)| rest.is_empty() && a_variables_name(name));
    words.next().is_none() && expanded
}

/// Whether `text` is a variable's name as they are written, in capitals
/// (`GITHUB_TOKEN`).
fn a_variables_name(text: &str) -> bool {
    is_env_name(text) && !text.chars().any(|ch| ch.is_ascii_lowercase())
}

/// Whether `value`, an option's, may be a secret ([`may_be_secret`]) and is none of
/// these: for `--auth`, a method's name; for an option named by a plural, a file
/// (`--secrets secrets.env`, `--load-cookies cookies.txt`: it takes where they are);
/// for a signature's option, an algorithm's name (`--signature=sha256`).
fn gives_a_secret(option: &str, value: &str) -> bool {
    let name = normalized(option.trim_start_matches('-'));
    let a_method = name == "auth" && names_a_method(value);
    let where_they_are = named_by_a_plural(option) && names_a_file(value);
    let an_algorithm = name.ends_with("signature") && names_an_algorithm(value);
    may_be_secret(value) && !a_method && !where_they_are && !an_algorithm
}

/// Whether an option's last word is a credential's in the plural (`--secrets`,
/// `--load-cookies`, `--api-keys`).
fn named_by_a_plural(option: &str) -> bool {
    words_of(option.trim_start_matches('-'))
        .last()
        .is_some_and(|last| {
            last.strip_suffix('s')
                .is_some_and(|singular| CREDENTIAL_WORDS.contains(&singular))
        })
}

/// Whether `value` names a file: a path ([`names_a_path`]), or, of letters, digits,
/// spaces and `.`, `_`, `-`, `/`, `(`, `)` alone (not a `user:pass/word`, `SID=…`,
/// `Pa$$.w0rd` or `ab/cd+ef`), one in a folder (`config/creds`) or with a short
/// extension (`secrets.env`, `cookies (1).txt`); after a Windows or an expanded path's
/// start ([`after_a_path_s_start`]), `\` separates folders too.
fn names_a_file(value: &str) -> bool {
    let named = value.rsplit_once('.').is_some_and(|(stem, extension)| {
        !stem.is_empty()
            && (1..=5).contains(&extension.len())
            && extension.chars().all(|ch| ch.is_ascii_alphanumeric())
    });
    let started = after_a_path_s_start(value);
    let rest = started.unwrap_or(value);
    // After a path's start, an expansion may name a folder too (`C:\Users\%USERNAME%\…`).
    let kept = started.map_or_else(|| rest.to_owned(), without_expansions);
    let plain = kept.chars().all(|ch| {
        ch.is_ascii_alphanumeric() || "._-/ ()".contains(ch) || (started.is_some() && ch == '\\')
    });
    names_a_path(value) || (plain && (rest.contains(['/', '\\']) || named))
}

/// What follows a Windows or an expanded path's start: a drive (`C:\`, `C:/`), a
/// variable's expansion before a separator (`${HOME}/`, `$HOME/`, `%APPDATA%\`), a
/// share (`\\server\…`), or `.\`, `..\` or `~\`.
fn after_a_path_s_start(value: &str) -> Option<&str> {
    let mut chars = value.chars();
    if let (Some(letter), Some(':'), Some('/' | '\\')) = (chars.next(), chars.next(), chars.next())
    {
        if letter.is_ascii_alphabetic() {
            return Some(&value[2..]);
        }
    }
    match leading_expansion(value) {
        Some((_, rest)) if rest.starts_with(['/', '\\']) => Some(rest),
        _ if value.starts_with("\\\\") => Some(&value[1..]),
        _ => ["..", ".", "~"].iter().find_map(|start| {
            value
                .strip_prefix(start)
                .filter(|rest| rest.starts_with('\\'))
        }),
    }
}

/// The variable `text` starts by expanding (`${HOME}`, `%APPDATA%`, `$HOME`), and what
/// follows it.
fn leading_expansion(text: &str) -> Option<(&str, &str)> {
    fn bare(rest: &str) -> (&str, &str) {
        let end = rest
            .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
            .unwrap_or(rest.len());
        rest.split_at(end)
    }
    text.strip_prefix("${")
        .and_then(|rest| rest.split_once('}'))
        .or_else(|| text.strip_prefix('%').and_then(|rest| rest.split_once('%')))
        .or_else(|| text.strip_prefix('$').map(bare))
        .filter(|(name, _)| is_env_name(name))
}

/// `text` without its well-formed expansions ([`leading_expansion`]); a stray `$` or `%`
/// (`Pa$$.w0rd`) stays.
fn without_expansions(text: &str) -> String {
    let mut kept = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(['$', '%']) {
        kept.push_str(&rest[..at]);
        let tail = &rest[at..];
        match leading_expansion(tail) {
            Some((_, after)) => rest = after,
            None => {
                kept.push_str(&tail[..1]);
                rest = &tail[1..];
            }
        }
    }
    kept.push_str(rest);
    kept
}

/// Digest and signature algorithms a signature's option names (`--signature=sha256`).
fn names_an_algorithm(value: &str) -> bool {
    const ALGORITHMS: [&str; 12] = [
        "sha1",
        "sha256",
        "sha384",
        "sha512",
        "md5",
        "hmacsha1",
        "hmacsha256",
        "hmacsha512",
        "rsa",
        "ecdsa",
        "ed25519",
        "none",
    ];
    ALGORITHMS.contains(&normalized(value).as_str())
}

/// Whether a value may be a secret: not empty, a path, a switch ([`a_switch`]), nor an
/// expansion ([`an_expansion`]).
fn may_be_secret(value: &str) -> bool {
    !value.is_empty() && !names_a_path(value) && !a_switch(value) && !an_expansion(value)
}

/// Whether `value` is a switch's word or digit (`true`, `off`, `1`): any other number
/// may be a PIN or a password.
fn a_switch(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "0" | "1"
    )
}

/// Authentication methods an `--auth` option names (`--auth=none`, `--auth basic`).
fn names_a_method(value: &str) -> bool {
    const METHODS: [&str; 14] = [
        "none",
        "basic",
        "bearer",
        "digest",
        "ntlm",
        "negotiate",
        "oauth",
        "oauth2",
        "token",
        "jwt",
        "aws",
        "sigv4",
        "kerberos",
        "anonymous",
    ];
    METHODS.contains(&value.to_ascii_lowercase().as_str())
}

/// Whether `text` is a credential header with its value: `Authorization: …`, `Cookie:
/// …`, another header named as a credential (`X-Api-Key: …`, `X_API_KEY: …`), or a bare
/// `Bearer TOKEN`. Prose that only holds such a word (`echo "bearer of news"`) is none.
fn is_a_credential_header(text: &str) -> bool {
    let text = text.trim();
    if let Some((name, value)) = text.split_once(':') {
        let name = name.trim_end();
        let named = !name.is_empty()
            && name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
            && (matches!(
                name.to_ascii_lowercase().as_str(),
                "authorization" | "proxy-authorization" | "cookie"
            ) || holds_a_credential_word(name));
        if named && !value.trim().is_empty() && !an_expansion(value) {
            return true;
        }
    }
    let mut words = text.split_whitespace();
    matches!(
        (words.next(), words.next(), words.next()),
        (Some(scheme), Some(_), None) if scheme.eq_ignore_ascii_case("bearer")
    ) && !an_expansion(text)
}

/// Whether `text` holds, anywhere, an `Authorization` or `Cookie` header's value (the
/// name, then `:` or `=`, a quote or space allowed around them) or `Bearer` before a
/// token (a run of at least 8 characters holding a digit, `-`, `_` or `.`): a
/// `curl -H 'Authorization: Bearer …'` in a `sh -c` script, `-HAuthorization: …`,
/// `--headers={"Authorization": "Bearer …"}`. `bearer of news` holds none.
fn holds_a_credential_header(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let after = |name: &str| {
        lower.match_indices(name).any(|(at, _)| {
            // The original text (the same offsets): a variable is named in capitals.
            let rest = text[at + name.len()..].trim_start_matches(['"', '\'', ' ', '\t']);
            rest.strip_prefix([':', '='])
                .map(|value| value.trim_start_matches(['"', '\'', ' ', '\t']))
                .is_some_and(|value| {
                    let literal = value
                        .chars()
                        .next()
                        .is_some_and(|ch| !"\"',;}".contains(ch));
                    let value = value
                        .split(['"', '\'', ',', ';'])
                        .next()
                        .unwrap_or_default();
                    // `--no-cookie=1`, `--require-authorization=false`: a switch.
                    literal && !an_expansion(value) && !a_switch(value.trim())
                })
        })
    };
    let bearer = lower.match_indices("bearer").any(|(at, _)| {
        let rest = &text[at + "bearer".len()..];
        let Some(token) = rest.strip_prefix(char::is_whitespace).map(|rest| {
            rest.trim_start()
                .split(|ch: char| ch.is_whitespace() || "\"',;}".contains(ch))
                .next()
                .unwrap_or_default()
        }) else {
            return false;
        };
        let marked = token
            .chars()
            .any(|ch| ch.is_ascii_digit() || "-_.".contains(ch));
        !an_expansion(token) && (token.len() >= 16 || (token.len() >= 8 && marked))
    });
    after("authorization") || after("cookie") || bearer
}

/// Whether a program's argument is an option named as a credential (`--token`,
/// `-password`, `--api-key`, `--authtoken`, `--pat`, `--auth`), whose value may be the
/// argument after it: by a credential's word in it ([`holds_a_credential_word`]) or a
/// name that says so ([`names_a_credential`]).
pub fn is_a_credential_option(arg: &str) -> bool {
    let name = arg.trim_start_matches('-');
    arg.starts_with('-') && (holds_a_credential_word(name) || names_a_credential(name))
}

/// Whether `name` holds a credential's word anywhere, a setting's or not
/// (`--token-provider`): a value after it that looks like a secret is one.
fn mentions_a_credential_word(name: &str) -> bool {
    words_of(name).iter().any(|word| is_a_credential_word(word))
}

/// Whether one of a name's words ([`words_of`]) is a credential's, or its plural
/// ([`CREDENTIAL_WORDS`], [`COMPOUND_CREDENTIAL_WORDS`]).
fn is_a_credential_word(word: &str) -> bool {
    let singular = word.strip_suffix('s').unwrap_or(word);
    CREDENTIAL_WORDS.contains(&singular) || COMPOUND_CREDENTIAL_WORDS.contains(&singular)
}

/// Whether `arg`, right after `previous`, may give a credential as the argument after
/// its option (`--token VALUE`): `previous` is named as a credential and has no value
/// of its own, and `arg` is neither an option nor a path, nor a method after `--auth`.
/// A guess (`--secret MY_SECRET_NAME` names one): a registration is warned, and an
/// event refused only where the argument also looks like a secret ([`looks_secret`]).
pub fn follows_a_credential_option(previous: &str, arg: &str) -> bool {
    !previous.contains('=')
        && is_a_credential_option(previous)
        && !arg.starts_with('-')
        && gives_a_secret(previous, arg)
}

/// Whether `arg`, right after `previous`, is to be refused as a credential given after
/// its option ([`follows_a_credential_option`]): one that looks like a secret
/// ([`looks_secret`]), or any value after a password, passphrase, cookie, token, secret
/// or bearer option that is no variable's name (`MY_SECRET_NAME`); after a key's
/// option (`--ssh-key id_ed25519`) a name is often a key's.
pub fn secret_after_option(previous: &str, arg: &str) -> bool {
    let words = words_of(previous.trim_start_matches('-'));
    let keyed = words
        .last()
        .is_some_and(|last| last.ends_with("key") || last.ends_with("keys"));
    // A variable's name, or a docker or podman reference after a secret's option
    // (`--secret id=npmrc,src=/home/u/.npmrc`), says where a secret is, not what.
    let secrets = words
        .last()
        .is_some_and(|last| matches!(last.as_str(), "secret" | "secrets"));
    let a_name = a_variables_name(arg) || (secrets && a_reference(arg));
    let option = previous.starts_with('-') && !previous.contains('=');
    let looks = option
        && mentions_a_credential_word(previous.trim_start_matches('-'))
        && looks_secret_after(previous, arg);
    looks
        || (option && gives_a_users_password(previous, arg))
        || (follows_a_credential_option(previous, arg) && !keyed && !a_name)
}

/// Whether `value`, after `option` holding a credential's word, looks like a secret
/// ([`looks_secret`]): not a path or a URL, nor after a word naming where or which one
/// it is (`--kms-key-id`, `--token-url`, `--secret-arn`), but for a token of a known
/// shape ([`has_a_known_token_shape`]) wherever it is.
fn looks_secret_after(option: &str, value: &str) -> bool {
    const PLACES: [&str; 11] = [
        "id", "arn", "url", "uri", "endpoint", "file", "path", "dir", "name", "domain", "host",
    ];
    let words = words_of(option.trim_start_matches('-'));
    let place = words
        .iter()
        .rposition(|word| is_a_credential_word(word))
        .and_then(|at| words.get(at + 1))
        .is_some_and(|next| PLACES.contains(&next.as_str()));
    has_a_known_token_shape(value)
        || (looks_secret(value) && !names_a_path(value) && !value.contains("://") && !place)
}

/// Whether `text` is a secret's reference, as `docker build --secret` and `podman run
/// --secret` take one: a name, then `key=value` fields of the keys they know
/// (`gh_token,type=env,target=GITHUB_TOKEN`, `id=npmrc,src=/home/u/.npmrc`).
fn a_reference(text: &str) -> bool {
    const KEYS: [&str; 8] = [
        "id", "src", "source", "type", "target", "env", "uid", "mode",
    ];
    let mut fields = text.split(',');
    let first = fields.next().unwrap_or_default();
    let known = |field: &str| {
        field
            .split_once('=')
            .is_some_and(|(key, value)| KEYS.contains(&key) && !value.is_empty())
    };
    let a_name = |field: &str| {
        !field.is_empty()
            && field
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_-.".contains(ch))
    };
    text.contains('=') && (known(first) || a_name(first)) && fields.all(known)
}

/// Whether a program's argument carries a credential: one it gives
/// ([`argument_gives_a_credential`]), or a URL holding one (user info, or a parameter
/// named as a secret).
pub fn argument_carries_a_credential(arg: &str) -> bool {
    argument_gives_a_credential(arg)
        || has_a_known_token_shape(arg)
        || (arg.contains("-----BEGIN") && arg.contains("PRIVATE KEY-----"))
        || urls_in(arg).any(|url| crate::uri::has_userinfo(url) && !an_ssh_login(url))
        || a_url_parameter_names_a_secret(arg)
}

/// Whether a parameter in a URL's query or fragment anywhere in `text` is named as a
/// credential, as [`has_a_secret_parameter`] reads one URL's. Each word (up to a space) is
/// read once, from the first `?` or `#` after its first URL: the parameters of every URL
/// in the word are among those. Read URL by URL, each running to the word's end, the URLs
/// of one word lie inside each other, and a word of a hundred thousand `x://` cost their
/// product, past the component's bound.
fn a_url_parameter_names_a_secret(text: &str) -> bool {
    text.split(char::is_whitespace).any(|word| {
        word.find("://")
            .is_some_and(|url| has_a_secret_parameter(&word[url..]))
    })
}

/// Whether `url` is an SSH URL whose user info is a login name alone
/// (`git+ssh://git@github.com/org/repo.git`, `sftp://alice%40example.com@…`): SSH asks
/// its credential of a key or a prompt, never of the name. Not a name with a password or
/// parameters, which may hold one, percent-encoded too (`user:pw@`, `user%3Apw@`,
/// WinSCP's `user;x-proxypassword=…@`). In an HTTP URL a name alone may be a token
/// (`https://<token>@github.com/…`), so that user info still counts.
fn an_ssh_login(url: &str) -> bool {
    const SSH: [&str; 5] = ["ssh", "git+ssh", "ssh+git", "svn+ssh", "sftp"];
    let scheme = url.split_once(':').map_or("", |(scheme, _)| scheme);
    SSH.iter().any(|ssh| ssh.eq_ignore_ascii_case(scheme))
        && crate::uri::authority(url)
            .and_then(|authority| authority.rsplit_once('@'))
            .is_some_and(|(user, _)| {
                let user = percent_decoded(user);
                !user.is_empty() && !user.contains([':', ';'])
            })
}

/// The URLs in `text`, each from its scheme to the end of its authority, where its user
/// info is: the authority ends at a space, at the quote that opened the URL
/// (`{"url":"https://…"}`), or as [`crate::uri::has_userinfo`] ends it. Found after a `:`
/// before it too (`export PATH=/a:/b; git clone https://user:pass@host/r`). Each is read
/// no further than its authority, so a text of many URLs costs its length.
fn urls_in(text: &str) -> impl Iterator<Item = &str> {
    text.match_indices("://").map(move |(at, _)| {
        let scheme = text[..at]
            .char_indices()
            .rev()
            .find(|(_, ch)| !(ch.is_ascii_alphanumeric() || "+.-".contains(*ch)))
            .map_or(0, |(before, ch)| before + ch.len_utf8());
        let opened = text[..scheme]
            .chars()
            .next_back()
            .filter(|ch| "\"'".contains(*ch));
        let special = crate::uri::is_special(&text[scheme..at]);
        // After `//`, a special scheme's authority starts past any further `/` and `\`.
        let rest = &text[at + 3..];
        let leading = match special {
            true => rest.len() - rest.trim_start_matches(['/', '\\']).len(),
            false => 0,
        };
        let ends = |ch: char| {
            ch.is_whitespace()
                || Some(ch) == opened
                || matches!(ch, '/' | '?' | '#')
                || (special && ch == '\\')
        };
        let authority = &rest[leading..];
        let end = authority.find(ends).unwrap_or(authority.len());
        &text[scheme..at + 3 + leading + end]
    })
}

/// Tokens whose issuers gave them a prefix for secret scanners to find, with what
/// follows it: GitHub's, npm's, OpenAI's and Anthropic's, Stripe's, Slack's, GitLab's,
/// and AWS's access key ids.
const TOKEN_SHAPES: [(&str, Rest); 19] = [
    ("ghp_", Rest::Alphanumeric(36)),
    ("gho_", Rest::Alphanumeric(36)),
    ("ghu_", Rest::Alphanumeric(36)),
    ("ghs_", Rest::Alphanumeric(36)),
    ("ghr_", Rest::Alphanumeric(36)),
    ("npm_", Rest::Alphanumeric(36)),
    ("github_pat_", Rest::Token(22)),
    ("sk-ant-", Rest::Token(20)),
    ("sk-proj-", Rest::Token(20)),
    ("sk_live_", Rest::Token(20)),
    ("sk_test_", Rest::Token(20)),
    ("xoxa-", Rest::Token(15)),
    ("xoxb-", Rest::Token(15)),
    ("xoxp-", Rest::Token(15)),
    ("xoxr-", Rest::Token(15)),
    ("xoxs-", Rest::Token(15)),
    ("glpat-", Rest::Token(20)),
    ("AKIA", Rest::Capitals(16)),
    ("ASIA", Rest::Capitals(16)),
];

/// What follows a token's prefix ([`TOKEN_SHAPES`]).
enum Rest {
    /// At least this many letters and digits.
    Alphanumeric(usize),
    /// At least this many letters, digits, `_` and `-`.
    Token(usize),
    /// Exactly this many capital letters and digits.
    Capitals(usize),
}

impl Rest {
    fn fits(&self, rest: &str) -> bool {
        match *self {
            Rest::Alphanumeric(fewest) => {
                rest.len() >= fewest && rest.chars().all(|ch| ch.is_ascii_alphanumeric())
            }
            Rest::Token(fewest) => {
                rest.len() >= fewest
                    && rest
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || "_-".contains(ch))
            }
            Rest::Capitals(length) => {
                rest.len() == length
                    && rest
                        .chars()
                        .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit())
            }
        }
    }
}

/// Whether `text` holds a token of a known shape ([`TOKEN_SHAPES`]) in a run of letters,
/// digits, `_` and `-` (wherever: `export GITHUB_TOKEN=ghp_…; exec srv`,
/// `{\"key\":\"sk-proj-…\"}`), but for a loose shape (`xoxb-` and 15 of those) in a
/// file's name (the run followed by `.` and a letter: `tests/sk_test_helpers.py`) or a
/// package's or model's after `/` or `@` (`@scope/xoxb-notifier-bot-for-slack`); or an
/// OpenAI-style `sk-` key of 20 characters or more with a digit among them as a word of
/// its own (not `models/sk-learn-2024.pkl`): whatever names it.
fn has_a_known_token_shape(text: &str) -> bool {
    let token_character = |ch: char| ch.is_ascii_alphanumeric() || "_-".contains(ch);
    let fits = |run: &str, strict: bool| {
        TOKEN_SHAPES.iter().any(|(prefix, rest)| {
            strict != matches!(rest, Rest::Token(_))
                && run
                    .strip_prefix(prefix)
                    .is_some_and(|after| rest.fits(after))
        })
    };
    let in_a_run = |start: usize| {
        let run = text[start..]
            .split(|ch: char| !token_character(ch))
            .next()
            .unwrap_or_default();
        let a_file = text[start + run.len()..]
            .strip_prefix('.')
            .is_some_and(|rest| rest.starts_with(|ch: char| ch.is_ascii_alphabetic()));
        let a_name = text[..start].ends_with(['/', '@']);
        fits(run, true) || (fits(run, false) && !a_file && !a_name)
    };
    let openai = |word: &str| {
        word.strip_prefix("sk-").is_some_and(|rest| {
            rest.len() >= 20
                && rest.chars().all(token_character)
                && rest.chars().any(|ch| ch.is_ascii_digit())
        })
    };
    let mut starts = std::iter::once(0).chain(
        text.match_indices(|ch: char| !token_character(ch))
            .map(|(at, separator)| at + separator.len()),
    );
    let mut words = text.split(|ch: char| ch.is_whitespace() || "=:,\"';&|()<>`".contains(ch));
    starts.any(in_a_run) || words.any(openai)
}

/// Whether `text` looks like a secret rather than a name: a known token prefix
/// (`sk-`, `ghp_`, `github_pat_`, `xox`, `AKIA`, `eyJ`), or 20 characters or more with
/// both letters and digits and no space.
pub fn looks_secret(text: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "sk-",
        "sk_",
        "ghp_",
        "gho_",
        "ghs_",
        "github_pat_",
        "xox",
        "AKIA",
        "eyJ",
    ];
    PREFIXES.iter().any(|prefix| text.starts_with(prefix))
        || (text.chars().count() >= 20
            && !text.contains(char::is_whitespace)
            && text.chars().any(|ch| ch.is_ascii_digit())
            && text.chars().any(|ch| ch.is_alphabetic()))
}

/// Whether an option's value is a file's path rather than a secret: absolute, relative
/// by `./`, `../` or `~/`, a key or certificate file by its extension, or an SSH key's
/// file by its name (`id_ed25519`, `id_rsa`).
fn names_a_path(value: &str) -> bool {
    const FILES: [&str; 13] = [
        ".pem", ".key", ".crt", ".cer", ".der", ".p12", ".pfx", ".jks", ".json", ".pub", ".ppk",
        ".gpg", ".asc",
    ];
    const SSH_KEYS: [&str; 8] = [
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        "id_rsa_sk",
        "id_dsa_sk",
        "id_ecdsa_sk",
        "id_ed25519_sk",
    ];
    value.starts_with('/')
        || ["./", "../", "~/"]
            .iter()
            .any(|start| value.starts_with(start))
        || FILES
            .iter()
            .any(|ext| value.to_ascii_lowercase().ends_with(ext))
        || SSH_KEYS.contains(&value)
}

/// `text` with each `%XX` escape replaced by its byte; a malformed escape is kept as
/// written, and bytes that are no UTF-8 are replaced (no secret name has any).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|hex| bytes[i] == b'%' && hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                decoded.push(byte);
                i += 3;
            }
            None => {
                decoded.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}
