//! Names that hold a credential, and URLs that carry one in a parameter: defined in
//! `ahp-vocab`, which the host's `--source` is checked with too, and tested here with
//! the other syntax predicates.

pub(crate) use ahp_vocab::{
    argument_carries_a_credential, ends_in_a_credential_word, follows_a_credential_option,
    has_a_secret_parameter, holds_a_credential_word, is_secret_name, mentions_a_credential,
    names_a_count_or_data_key, names_a_credential, normalized, secret_after_option,
};
#[cfg(test)]
pub(crate) use ahp_vocab::{argument_gives_a_credential, looks_secret, SECRET_NAMES};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::assert_shape;

    /// A name holding a credential's word whole is one, unless a setting word follows it
    /// or it is a data key; a word that only contains one (`keycloak`, `tokenizers`) is
    /// not.
    #[test]
    fn a_name_holding_a_credential_word_whole_is_one_unless_a_setting() {
        let credentials = [
            "SECRET_KEY_BASE",
            "API_KEY_2",
            "GITHUB_TOKEN_RO",
            "openaiKey",
            "X-Api-Key",
            "session-cookie",
            "PRIVATE_KEY_PEM",
            "apikey",
            "STRIPE_SECRET_KEY_LIVE",
            "OPENAI_API_KEY_PROD",
            "HF_TOKEN_WRITE",
            "API_KEY_V2",
            "basicCredentials",
            "API_KEYS",
            "API_TOKENS",
            "GITHUB_TOKENS",
        ];
        let others = [
            "KEYCLOAK_URL",
            "MONKEY_PATCH",
            "max_tokens",
            "TOKENIZERS_PARALLELISM",
            "TOKEN_URL",
            "key-file",
            "api_key_env",
            "secretName",
            "RUST_LOG",
            "token-limit",
            "cookie-jar",
            "sort-key",
            "PRIMARY_KEY",
            "KEY_PREFIX",
            "COOKIE_DOMAIN",
            "PASSWORD_MIN_LENGTH",
            "key-id",
            "keyring",
            "api-key-header",
            "secret-store",
            "token-type",
            "password-file",
            "cookie-name",
            "range-key",
            "public-key",
            "MAX_TOKENS",
            "prompt_tokens",
            "ACCESS_TOKEN_EXPIRE_MINUTES",
            "SESSION_COOKIE_SECURE",
            "SORT_KEYS",
            "max_new_tokens",
            "tokens_per_minute",
            "token_lifetime",
            // ssh's options about host keys, a keystore's alias, a token's validity.
            "StrictHostKeyChecking",
            "HostKeyAlgorithms",
            "PubkeyAcceptedKeyTypes",
            "HostKeyAlias",
            "key-alias",
            "token-validity",
        ];
        assert_shape(holds_a_credential_word, &credentials, &others);
    }

    /// An argument gives a credential when an option named as one has a value that is no
    /// path, or when it is a credential header's value; the value is never repeated.
    #[test]
    fn an_argument_giving_a_credential_is_told_apart() {
        let credentials = [
            "--api-key=sk-1",
            "-token=t",
            "--openai-key=sk-1",
            "--session-cookie=c",
            "--password=p",
            "--authtoken=2abc",
            "--accesstoken=sk",
            "--clientsecret=x",
            "--pat=ghp_x",
            "--header=Authorization: Bearer sk-1",
            "Authorization: Bearer sk-1",
            "Cookie: sid=1",
            "X-Api-Key: sk-1",
            "X_API_KEY: sk-1",
            "--header=X-Api-Key: sk-1",
            "Bearer sk-1",
            "curl -H 'Authorization: Bearer sk-live-123' https://api.example/",
            "-HAuthorization: Bearer x",
            "--headers={\"Authorization\": \"Bearer sk-live-123\"}",
            "--header=Authorization=Bearer sk-live-123",
            "Bearer sk-live-123 x",
            "--auth=alice:s3cret",
            "--auth=sk-live-123",
            "--api-key-prod=sk",
            "--token=~",
            "--env=OPENAI_API_KEY=sk-proj-abc",
            "GITHUB_TOKEN=ghp_x",
            "--password=$ecretPass1",
            "--password=123456",
            "DB_PASSWORD=123456",
            "--password=NaN",
            "--password=hunter2.txt",
            "--token-provider=ghp_abcdefghijklmnop1234567890ABCD",
            "-HAuthorization: Bearer $T sk-live-abcdef1234567890",
            "Authentication: Bearer AbCdEfGhIjKlMnOpQrSt",
            // An option named by a plural takes files, not one secret.
            "--credentials=alice:s3cret",
            "--secrets=hunter2",
            "--passwords=hunter2",
            "--api-keys=hunter2",
            "--cookies=SID=abc123",
            // A configuration key named as a credential (npm, helm, spark).
            "//registry.npmjs.org/:_authToken=npm_abc123",
            "auth.rootPassword=hunter2",
            "spark.hadoop.fs.s3a.secret.key=abc123xyz",
            // A user's password after an authentication or a user's option.
            "--basic-auth=alice:s3cret",
            "--http-auth=alice:s3cret",
            "--user=alice:s3cret",
            "--user=alice:p@ss",
            // A password named by its short form, and openssl's literal one.
            "MYSQL_PWD=hunter2",
            "--db-pwd=hunter2",
            "pass:hunter2",
            // A signature itself, not its algorithm.
            "--signature=3f9a8c7e2b1d4f6a8c0e2b4d",
            "--token-provider=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
        ];
        let others = [
            "--key=/etc/ahp/client.pem",
            "--key=certs/client.pem",
            "--key-file=k",
            "--token-url=https://idp.example/token",
            "--secret-name=x",
            "--api-key-env=NAME",
            "--max-tokens=5",
            "--auth=none",
            "--token",
            "--port=8080",
            "policy.py",
            "--sort-key=name",
            "--primary-key=id",
            "--token-limit=4096",
            "--cookie-jar=cookies.txt",
            "--key-size=2048",
            "--token=~/token",
            "echo \"bearer of news\"",
            "--auth=basic",
            "Content-Type: application/json",
            "--key-id=abc",
            "--api-key-header=X-Key",
            "--secret-store=vault",
            "--token-type=bearer",
            "--password-file=p.txt",
            "--cookie-name=sid",
            "--authorization-url=https://idp.example/authorize",
            "curl -H \"Authorization: Bearer $GITHUB_TOKEN\" https://api.github.com/user",
            "Authorization:${AUTH_HEADER}",
            "--token=$GITHUB_TOKEN",
            "--token-expiry=3600",
            "--cookie-secure=false",
            "--api-key-required=false",
            "--password-policy=strict",
            "PATH=/usr/bin",
            "GITHUB_TOKEN=$GITHUB_TOKEN",
            "--secrets=secrets.env",
            "--load-cookies=cookies.txt",
            "--token-provider=github",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN=1",
            "USE_API_KEY=true",
            "--credentials=/etc/creds.json",
            // A path, a URL or an id after an option holding a credential's word.
            "--ssh-key=/home/u/.ssh/id_ed25519",
            "--key=/etc/ssl/private/server2024.pem",
            "--api-key=/run/secrets/openai_key_2024",
            "--token-url=https://login.example/72f988bf-86f1-41af/token",
            "--kms-key-id=1234abcd-12ab-34cd-56ef-1234567890ab",
            "--secret-arn=arn:aws:secretsmanager:eu-west-1:123456789012:secret:db-2024",
            "--ssh-key=id_ed25519",
            // Configuration keys that are settings or data keys.
            "ingress.tls.secretName=foo",
            "auth.existingSecret=my-secret",
            "--existing-secret=db-credentials",
            "sort.key=id",
            "credential.helper=store",
            "PasswordAuthentication=no",
            "PWD=/home/u",
            // A user's group or id (docker's `-u`).
            "--user=1000:1000",
            "--user=node:node",
            "--user=app:staff",
            // Switches after a header's name, and an algorithm after a signature's option.
            "--no-cookie=1",
            "--require-authorization=false",
            "--signature=sha256",
            "--signature=HMAC-SHA256",
            // A scheme before an expansion.
            "Bearer $TOKEN",
            "--token=Bearer $TOKEN",
        ];
        assert_shape(argument_gives_a_credential, &credentials, &others);
        // The value after an option named as a credential, unless it is a path or an
        // option itself.
        assert!(follows_a_credential_option("--api-key", "sk-1"));
        assert!(follows_a_credential_option("--authtoken", "2abc"));
        assert!(!follows_a_credential_option("--api-key", "--verbose"));
        assert!(!follows_a_credential_option("--key", "/etc/ahp/key.pem"));
        assert!(!follows_a_credential_option("--token=2", "y"));
        assert!(!follows_a_credential_option("--auth", "basic"));
        assert!(follows_a_credential_option("--auth", "alice:s3cret"));
        // Only one that looks like a secret, where a guess refuses (an event's).
        assert!(looks_secret("sk-live-123") && looks_secret("ghp_abc"));
        assert!(looks_secret("a1b2c3d4e5f6g7h8i9j0"));
        assert!(!looks_secret("MY_SECRET_NAME") && !looks_secret("id_ed25519"));
        // After its option: any password, token or secret but a variable's name or a
        // reference; after a key's option, one that looks like a secret; a user's
        // password, not a group or an identity; a plural option's value unless a file.
        let refused = [
            ("--password", "hunter2"),
            ("--token", "abc123"),
            ("--key", "sk-live-123"),
            ("--password", "cGFzc3dvcmQxMjM="),
            ("--password", "p=ss"),
            ("--secret", "a=b,c"),
            ("--token", "1234567890123456"),
            ("--token-source", "ghp_abcdefghijklmnop1234567890ABCD"),
            ("--existing-password", "hunter2"),
            // A docker or podman reference only after a secret's option.
            ("--token", "hunter2,uid=0"),
            ("--secrets", "hunter2"),
            ("--credentials", "alice:s3cret"),
            ("--secrets", "p@ss/w0rd"),
            ("--passwords", "Pa$$.w0rd"),
            ("--tokens", "Xk9\\mP2q"),
            ("--passwords", "$Secret/2024$"),
            ("--basic-auth", "alice:s3cret"),
            ("--auth-user", "alice:hunter2"),
            ("--auth-http", "admin:S3cret99"),
            ("-u", "alice:s3cret"),
            ("-u", "system:Manager1"),
        ];
        let allowed = [
            ("--secret", "MY_SECRET_NAME"),
            ("--ssh-key", "id_ed25519"),
            ("--secret", "id=npmrc,src=/home/u/.npmrc"),
            ("--secret", "gh_token,type=env,target=GITHUB_TOKEN"),
            ("--cookies-from-browser", "chrome"),
            ("--password-stdin", "ghcr.io"),
            ("--signature", "sha256"),
            // A path, a URL or an id is no secret for looking like one.
            ("--ssh-key", "/home/u/.ssh/id_ed25519"),
            (
                "--token-url",
                "https://login.example/72f988bf-86f1-41af/token",
            ),
            ("--kms-key-id", "1234abcd-12ab-34cd-56ef-1234567890ab"),
            // A plural option's file, on Windows or expanded too.
            ("--load-cookies", "cookies.txt"),
            ("--credentials", "/etc/creds.json"),
            ("--secrets", "config/creds"),
            ("--cookies", "cookies (1).txt"),
            ("--cookies", "${HOME}/cookies.txt"),
            ("--secrets", "${HOME}/.config/${APP}/secrets.env"),
            ("--cookies", ".\\cookies.txt"),
            ("--cookies", "..\\cookies.txt"),
            ("--cookies", "\\\\fileserver\\share\\cookies.txt"),
            ("--secrets", "C:/secrets/prod.env"),
            ("--secrets", "%APPDATA%\\app\\secrets.env"),
            ("--secrets", "C:\\Users\\%USERNAME%\\secrets.env"),
            // A host's port after an option holding `auth`; a group or an identity.
            ("--auth-server", "auth.example.com:443"),
            ("-u", "1000:1000"),
            ("-u", "www-data:www-data"),
            ("--user", "arn:aws:eks:us-east-1:123456789012:cluster/prod"),
            ("--user", "system:serviceaccount:default:mcp"),
        ];
        let after = |(option, arg): (&str, &str)| secret_after_option(option, arg);
        assert_shape(after, &refused, &allowed);
        // A URL carries one in its user info or a parameter named as a secret.
        assert!(argument_carries_a_credential(
            "postgresql://u:p@localhost/db"
        ));
        assert!(!argument_carries_a_credential(
            "https://x.example/?tenant=a"
        ));
        assert!(!follows_a_credential_option("--sort-key", "name"));
    }

    /// Beside what an argument gives ([`argument_gives_a_credential`]), one carries a
    /// credential by a token of a known shape whatever names it, a private key, or a URL
    /// with user info, wherever the URL starts.
    #[test]
    fn an_argument_carrying_a_credential_is_told_apart() {
        let carrying = [
            "OPENAIKEY=sk-proj-abcdefghijklmnop1234",
            "GH_PAT=ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "SLACK_BOT=xoxb-1234-5678-abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "--config={\"key\": \"glpat-abcdefghij1234567890\"}",
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----",
            "sh -c 'export PATH=/a:/b; git clone https://u:p@h/r'",
            "docker run -p 8080:80 app postgres://u:p@db/x",
            "--config={\"url\":\"https://u:p@h/x\"}",
            // A token between any punctuation, a password that is no existing secret's
            // name, openssl's literal, a plural option's secret.
            "export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789; exec srv",
            "https://api.example/ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "--existing-password=hunter2",
            "EXISTING_TOKEN=abc123",
            "pass:$ecret1",
            "--credentials=alice:pa/ss",
            // A quote in a URL's password, an indexed key, `auth` before another word, a
            // Slack token as a word of its own.
            "postgres://u:pa'ss@db/x",
            "DATABASE_URL=postgres://app:it's-s3cret@db/app",
            "auth.passwords[0]=hunter2",
            "--set=auth.passwords[0]=hunter2",
            "--auth-basic=alice:hunter2",
            "export T=xoxb-1234567890-abcdefghij; exec srv",
            // A loose token shape touching punctuation, a password after a plural
            // option, `PULL_SECRETS` holding a docker config.
            "{\\\"key\\\":\\\"sk-proj-abcdefghij1234567890abcd\\\"}",
            "echo the token is xoxb-1234567890-abcdefghijklmnop.",
            "--passwords=Pa$$.w0rd",
            "--passwords=Winter\\2024",
            "--pull-secrets=hunter2",
            // A method after `auth`.
            "--auth-http=admin:S3cret99",
            "--auth-digest=alice:S3cret99",
            // A password later in a helm list.
            "--set=global.pullSecrets[0]=regcred,auth.rootPassword=S3cretPass99",
            "--set=foo=bar,auth.rootPassword=S3cretPass99",
            // A password in an SSH URL; a name alone in an HTTP URL, which may be a token.
            "ssh://git:hunter2@github.com/org/repo",
            "sftp://alice:pw@files.example/x",
            "https://git@github.com/org/repo",
            "sftp://deploy;x-proxypassword=S3cretPass99@files.example.com/",
            "ssh://user%3Ahunter2@host/x",
            // A secret's look under a count's name.
            "TOTAL_ACCESS_TOKENS=0123456789abcdef0123456789abcdef01234567",
            // A parameter after a URL nested in another's query, or in a value.
            "https://a.example/?redirect=https://b.example/x&token=abc",
            "--data=https://h/x?q='?token=abc'",
            // Under a count's name: a UUID, base64.
            "TOTAL_ACCESS_TOKENS=a1b2c3d4-e5f6-7890-abcd-ef1234567890",
            "TOTAL_ACCESS_TOKENS=dGhpc2lzYXNlY3JldHRva2VuMTIzNDU2Nzg5MA==",
        ];
        let others = [
            "--model=gpt-4o",
            "1234abcd-12ab-34cd-56ef-1234567890ab",
            "https://api.example:8443/x",
            "--listen=127.0.0.1:8080",
            "sk-learn-classifier-and-more",
            "-----BEGIN CERTIFICATE-----",
            "sh -c 'export PATH=/a:/b; git clone https://h/r'",
            // A place after an option holding `auth`, a kubeconfig user, configuration
            // keys naming no credential, a region, an npm variable, a URL followed by a
            // package's `@`, openssl's expansion, a model's file.
            "--auth-host=localhost:8080",
            "--auth-provider=oidc:google",
            "--user=arn:aws:eks:us-east-1:123456789012:cluster/prod",
            "credential.username=alice",
            "credential.interactive=never",
            "access.token.lifespan=3600",
            "session.cookie.same-site=lax",
            "auth.existingSecretPasswordKey=redis-password",
            "--region=ASIA_PACIFIC_NORTHEAST",
            "npm_package_dependencies__modelcontextprotocol_sdk",
            "export PATH=/a:/b; npx --registry https://registry.npmjs.org @scope/pkg",
            "pass:$KEY_PASSWORD",
            "models/sk-learn-classifier-2024-v1.pkl",
            // A JSON string after a URL's, names of other things, a Windows path, file
            // and package names holding a loose token prefix.
            "--config={\"url\":\"https://h\",\"owner\":\"ops@example.com\"}",
            "auth.usernames[0]=alice",
            "imagePullSecrets[0]=regcred",
            "--auth-cache-dir=C:\\cache",
            "tests/sk_test_helpers_payment_flow.py",
            "@scope/xoxb-notifier-bot-for-slack",
            // Where and how `auth` is configured, a Kubernetes pull secret's name, a URN
            // identity.
            "--auth-config=file:./auth.yaml",
            "--auth-server=[::1]:9000",
            "--auth-scopes=read:org,repo",
            "--set=imagePullSecrets[0]=regcred",
            "--user=urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
            // Helm's pull secrets by a key's path.
            "--set=global.pullSecrets[0]=regcred",
            "--set=global.pullSecrets[0]=regcred,image.tag=1.2.3",
            "--env=TOKEN_FILE=/run/secrets/token,MAX_TOKENS=4096",
            // Counts and lifetimes of tokens in lists.
            "--gen_kwargs=temperature=0,max_new_tokens=256",
            "--model_args=pretrained=x,max_num_batched_tokens=8192",
            "--set=a=b,rateLimit.tokensPerMinute=1000",
            "--set=config.foo=bar,config.token_lifetime=3600",
            // A login name alone in an SSH URL, ssh's and a JVM's options.
            "git+ssh://git@github.com/org/policy.git",
            "--from=git+ssh://git@github.com/org/mcp-server.git",
            "SSH://git@h/x",
            "StrictHostKeyChecking=accept-new",
            "-Dapp.jwt.token-validity=86400",
            // An e-mail login in an SSH URL; counts that are expansions, paths, models.
            "sftp://alice%40example.com@files.example/x",
            "MAX_TOKENS=${CLAUDE_3_MAX_TOKENS}",
            "--tokens-per-minute-file=./limits/tpm-2024.yaml",
            "max_tokens=meta-llama/Llama-3.1-8B",
            // A paging cursor after a URL's `?`, a value of a URL and an anchor.
            "https://api.example/items?page_token=abc123",
            "--link=https://x.example/?next=https://y.example/#top",
            // A query parameter with no value before an anchor.
            "https://h.example/page?api_key=#usage",
        ];
        assert_shape(argument_carries_a_credential, &carrying, &others);
        // A URL's scheme is looked for back from `://` past any letter, a wide one too.
        for text in ["ü://x", "--naïve=ü://u@h", "İ://a:b@c", "K://a:b@c", "://"] {
            let _ = argument_carries_a_credential(text);
        }
    }

    #[test]
    fn secret_names_are_compared_without_case_underscores_or_hyphens() {
        let secret = [
            "client_secret",
            "Access-Token",
            "API_KEY",
            "Authorization",
            "Cookie",
        ];
        let longer_or_other = ["tokenEnv", "clientSecretRef", "X-Tenant", "value", "author"];
        assert_shape(is_secret_name, &secret, &longer_or_other);
    }

    /// A name ending in a credential's word, or a short one, names a credential; one
    /// merely holding such a word only mentions one, and a paging cursor does no more.
    #[test]
    fn a_name_names_or_only_mentions_a_credential() {
        let names = [
            "apiToken",
            "private_token",
            "secretKey",
            "pat",
            "X-Amz-Signature",
            "auth_key",
            "appKey",
            "application_key",
            "license-key",
            "MASTER_KEY",
            "jwt",
        ];
        let mentions = [
            "client_secret_value",
            "GITHUB_TOKEN_FILE",
            "gpg-passphrase",
            "keyword",
            "max_tokens",
            "page_token",
        ];
        let neither = ["comment", "author", "signature_version", "tenant", "path"];
        assert_shape(
            names_a_credential,
            &names,
            &[&mentions[..], &neither].concat(),
        );
        assert_shape(mentions_a_credential, &mentions, &neither);
        // Named as the thing itself (a word at its end, or its plural), not as a setting
        // about it.
        let ending = [
            "proxyAuthorization",
            "signing_key",
            "sessionCookie",
            "basicCredentials",
            "gpg-passphrase",
            "apiKeys",
        ];
        let about = [
            "tokenType",
            "keyId",
            "bearerFormat",
            "keywords",
            "client_secret_value",
        ];
        assert_shape(
            ends_in_a_credential_word,
            &ending,
            &[&about[..], &neither].concat(),
        );
    }

    #[test]
    fn a_url_with_a_parameter_named_as_a_secret_carries_one() {
        let secret = [
            "https://policy.example.com/hook?access_token=abc123",
            "https://mcp.example/x?tenant=a&api_key=S",
            "https://mcp.example/x?API-KEY=S",
            "https://mcp.example/x?a=1;token=S",
            "https://mcp.example/x?access%5Ftoken=S",
            "https://mcp.example/x?%61uth=S",
            "https://mcp.example/cb#access_token=S&state=x",
            "https://mcp.example/x?auth_token=S",
            "https://mcp.example/x?oauth_token=S",
            "https://mcp.example/x?secret_key=S",
            "https://mcp.example/x?X-Amz-Security-Token=S&X-Amz-Signature=T",
            "https://mcp.example/x?key=S",
            "https://mcp.example/x?sig=S",
            "https://mcp.example/x?private_token=S",
            "https://mcp.example/x?x-api-key=S&api_secret=T",
            "https://mcp.example/x?subscription-key=S",
            "https://mcp.example/x?pat=S",
            // A name after a `?` inside a value, a URL of its own.
            "https://a.example/?redirect=https://b.example/x?token=abc",
            "https://h.example/x?q=?token=abc",
        ];
        let ordinary = [
            "https://mcp.example/x",
            "https://mcp.example/x?tenant=a&region=eu",
            "https://mcp.example/token/x?next=/token",
            "https://mcp.example/x?q=token&next=/token",
            "https://mcp.example/x?value=3",
            "https://mcp.example/x?%zz=1&%4",
            "https://mcp.example/x?%+4uth=1",
            "https://mcp.example/x#token-section",
            "https://mcp.example/x#auth",
            "https://mcp.example/x?client_secret",
            "https://mcp.example/x?token=",
            "https://mcp.example/x?author=a&keyword=b",
            "https://mcp.example/x?page_token=a&next_token=b&max_tokens=3",
            "https://mcp.example/x?tokenizer=a&signature_version=2&token_type=jwt",
            "https://h.example/page?api_key=#usage",
        ];
        assert_shape(has_a_secret_parameter, &secret, &ordinary);
    }
}
