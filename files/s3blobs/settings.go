package s3blobs

import (
	"flag"
	"fmt"
	"strconv"
)

// FromEnv sets the fields of c from the CONVO_S3_* variables that getenv
// gives (CONVO_S3_ENDPOINT, CONVO_S3_BUCKET, CONVO_S3_REGION,
// CONVO_S3_ACCESS_KEY, CONVO_S3_SECRET_KEY, CONVO_S3_INSECURE,
// CONVO_S3_PREFIX), leaving those unset as they are: the settings every
// convo command that reaches the bucket reads alike. An error names
// CONVO_S3_INSECURE when it is not true or false.
func (c *Config) FromEnv(getenv func(string) string) error {
	for name, dst := range map[string]*string{
		"CONVO_S3_ENDPOINT": &c.Endpoint, "CONVO_S3_BUCKET": &c.Bucket, "CONVO_S3_REGION": &c.Region,
		"CONVO_S3_ACCESS_KEY": &c.AccessKey, "CONVO_S3_SECRET_KEY": &c.SecretKey, "CONVO_S3_PREFIX": &c.Prefix,
	} {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	if v := getenv("CONVO_S3_INSECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("CONVO_S3_INSECURE: %q is not true or false", v)
		}
		c.Insecure = b
	}
	return nil
}

// RegisterFlags adds the --s3-* flags of c's fields to fs, each defaulting
// to the field's value. The secret key has no flag: a flag shows in the
// process list and in --help's defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Endpoint, "s3-endpoint", c.Endpoint, "the S3 API's host[:port], e.g. s3.eu-west-1.amazonaws.com (CONVO_S3_ENDPOINT)")
	fs.StringVar(&c.Bucket, "s3-bucket", c.Bucket, "the bucket of files' bytes; it must exist (CONVO_S3_BUCKET)")
	fs.StringVar(&c.Region, "s3-region", c.Region, "the bucket's region (CONVO_S3_REGION); empty: asked of the server")
	fs.StringVar(&c.AccessKey, "s3-access-key", c.AccessKey, "the S3 access key id (CONVO_S3_ACCESS_KEY); its secret is CONVO_S3_SECRET_KEY, which has no flag")
	fs.BoolVar(&c.Insecure, "s3-insecure", c.Insecure, "speak plain HTTP to the S3 endpoint, not HTTPS (CONVO_S3_INSECURE)")
	fs.StringVar(&c.Prefix, "s3-prefix", c.Prefix, "put before every object key, e.g. convo/ (CONVO_S3_PREFIX); objects are <prefix>blobs/<id>")
}
