// A punto-banco gateway client in Go, standard library only: it signs its requests, reads the
// open tables, places bets on the coup open for bets and waits for their settlement, then reads
// the round as a recall shows it.
//
//	PB_GATEWAY_URL=http://127.0.0.1:8104 PB_API_OPERATOR=acme PB_API_SECRET=... go run .
//
// Every request carries X-PB-Operator, X-PB-Timestamp (Unix seconds) and X-PB-Signature:
// sha256=<hex HMAC-SHA256 with the API secret of "<timestamp>.<METHOD>.<path with query>.<body>">.
// Errors come back as RFC 9457 problem details. Exit status 0 when every bet was answered and
// every accepted bet settled.
package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

type client struct {
	base, operator, secret string
	http                   *http.Client
}

// do sends a signed request and decodes a JSON answer into out (nil: ignore it).
func (c *client) do(method, path string, body any, out any) (int, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	mac := hmac.New(sha256.New, []byte(c.secret))
	mac.Write([]byte(stamp + "." + method + "." + path + "."))
	mac.Write(raw)
	req, err := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-PB-Operator", c.operator)
	req.Header.Set("X-PB-Timestamp", stamp)
	req.Header.Set("X-PB-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(data, out)
	}
	return resp.StatusCode, nil
}

type table struct {
	TableID  string `json:"table_id"`
	Currency string `json:"currency"`
	Coup     *struct {
		CoupID string `json:"coup_id"`
	} `json:"coup"`
}

type bet struct {
	BetID    string `json:"bet_id"`
	PlayerID string `json:"player_id"`
	TableID  string `json:"table_id"`
	CoupID   string `json:"coup_id"`
	BetType  string `json:"bet_type"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type view struct {
	BetID      string `json:"bet_id"`
	Status     string `json:"status"`
	Reason     string `json:"reason"`
	Settlement *struct {
		Result   string `json:"result"`
		Returned int64  `json:"returned"`
	} `json:"settlement"`
	Refund *struct{} `json:"refund"`
}

type round struct {
	Outcome string `json:"outcome"`
	Cards   []struct {
		Side string `json:"side"`
		Card string `json:"card"`
	} `json:"cards"`
	BetsCount int `json:"bets_count"`
}

func run() error {
	c := &client{
		base:     os.Getenv("PB_GATEWAY_URL"),
		operator: os.Getenv("PB_API_OPERATOR"),
		secret:   os.Getenv("PB_API_SECRET"),
		http: &http.Client{
			Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}
	if c.base == "" || c.operator == "" || c.secret == "" {
		return fmt.Errorf("set PB_GATEWAY_URL, PB_API_OPERATOR and PB_API_SECRET")
	}
	var open *table
	for deadline := time.Now().Add(60 * time.Second); open == nil; {
		var tables []table
		if _, err := c.do("GET", "/v1/tables", nil, &tables); err != nil {
			return err
		}
		for i := range tables {
			if tables[i].Coup != nil {
				open = &tables[i]
				break
			}
		}
		if open == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("no table open for bets")
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	ids := []string{}
	for i, side := range []string{"player", "banker", "tie"} {
		b := bet{
			BetID:    fmt.Sprintf("go-%s-%d", run, i),
			PlayerID: fmt.Sprintf("go-player-%d", i),
			TableID:  open.TableID,
			CoupID:   open.Coup.CoupID,
			BetType:  side,
			Amount:   1000,
			Currency: open.Currency,
		}
		var answer view
		if _, err := c.do("POST", "/v1/bets", b, &answer); err != nil {
			return err
		}
		fmt.Printf("bet %s: %s %s\n", b.BetID, answer.Status, answer.Reason)
		ids = append(ids, b.BetID)
	}
	for _, id := range ids {
		for deadline := time.Now().Add(90 * time.Second); ; {
			var v view
			if _, err := c.do("GET", "/v1/bets/"+url.PathEscape(id), nil, &v); err != nil {
				return err
			}
			if v.Status == "REJECTED" || v.Settlement != nil || v.Refund != nil {
				if v.Settlement != nil {
					fmt.Printf("bet %s: %s, returned %d\n", id, v.Settlement.Result, v.Settlement.Returned)
				}
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("bet %s not settled in time (%s)", id, v.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	var r round
	path := "/v1/rounds/" + url.PathEscape(open.TableID) + "/" + url.PathEscape(open.Coup.CoupID)
	if _, err := c.do("GET", path, nil, &r); err != nil {
		return err
	}
	fmt.Printf("round %s: %s, %d cards, %d of our bets\n", open.Coup.CoupID, r.Outcome, len(r.Cards), r.BetsCount)
	if r.Outcome == "" || len(r.Cards) < 4 {
		return fmt.Errorf("the round is not complete: %+v", r)
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
