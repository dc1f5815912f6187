package redact

import "testing"

func TestURL(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"postgres://app:s3cret@db:5432/bc?sslmode=verify-full": "postgres://app:xxxxx@db:5432/bc?sslmode=verify-full",
		"postgres://app@db/bc?password=s3cret&sslmode=require": "postgres://app@db/bc?password=xxxxx&sslmode=require",
		"postgres://app@db/bc?sslpassword=s3cret":              "postgres://app@db/bc?sslpassword=xxxxx",
		"host=db user=app password=s3cret dbname=bc":           "host=db user=app password=xxxxx dbname=bc",
		"host=db password = 's3 cr\\'et' sslmode=require":      "host=db password=xxxxx sslmode=require",
		"https://user:s3cret@ledger:8008":                      "https://user:xxxxx@ledger:8008",
		"postgres://app:s3cret@db:5432/bc%zz":                  "(unparseable URL)",
		"postgres://app@db/bc":                                 "postgres://app@db/bc",
	} {
		if got := URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestHasSecret(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]bool{
		"postgres://app:s3cret@db:5432/bc":                                true,
		"postgres://app:@db:5432/bc":                                      true,
		"postgres://app@db/bc?password=s3cret":                            true,
		"postgres://app@db/bc?SSLPassword=s3cret":                         true,
		"host=db user=app password=s3cret":                                true,
		"https://ledger:s3cret@ledger:8008":                               true,
		"postgres://app:s3cret@db/bc%zz":                                  true,
		"postgres://app@db:5432/bc?sslmode=require":                       false,
		"host=db user=app dbname=bc":                                      false,
		"http://127.0.0.1:8008":                                           false,
		"postgres://a@h1:5432,h2:5432/bc?target_session_attrs=read-write": false,
	} {
		if got := HasSecret(raw); got != want {
			t.Errorf("HasSecret(%q) = %v, want %v", raw, got, want)
		}
	}
}
