// One download or upload through the proxy Go's net/http takes from the
// environment (http.ProxyFromEnvironment: HTTPS_PROXY / HTTP_PROXY, upper
// case first; never for localhost or loopback addresses), for
// tests/integration/clients_test.cc. Standard library only.
//
//	client get URL OUT_FILE CA_FILE
//	client put URL IN_FILE CA_FILE   (prints the response body)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func run() error {
	if len(os.Args) != 5 {
		return fmt.Errorf("usage: client get|put URL FILE CA_FILE")
	}
	op, url, path, caFile := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return fmt.Errorf("no certificate in %s", caFile)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone() // Proxy: ProxyFromEnvironment
	transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	client := &http.Client{Transport: transport, Timeout: 60 * time.Second}

	var resp *http.Response
	if op == "get" {
		resp, err = client.Get(url)
	} else {
		f, ferr := os.Open(path)
		if ferr != nil {
			return ferr
		}
		defer f.Close()
		st, serr := f.Stat()
		if serr != nil {
			return serr
		}
		req, rerr := http.NewRequest(http.MethodPut, url, f)
		if rerr != nil {
			return rerr
		}
		req.ContentLength = st.Size()
		resp, err = client.Do(req)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if op == "get" {
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		defer out.Close()
		_, err = io.Copy(out, resp.Body)
		return err
	}
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
