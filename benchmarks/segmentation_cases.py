"""A labelled sentence-segmentation set: one line of text and the sentences it holds.

Covers what breaks naive splitters: abbreviations and titles, initials, decimals and prices, times,
URLs and e-mail addresses, quotes and brackets, ellipses, list markers, and lines without final
punctuation. Used by ``python -m benchmarks.segmenters`` to choose the segmenter and by the tests.
"""

CASES: list[tuple[str, list[str]]] = [
    ("Tom has 3 apples. Anna has 5 pears.", ["Tom has 3 apples.", "Anna has 5 pears."]),
    ("Dr. Chen will arrive in Beijing. He is late.", ["Dr. Chen will arrive in Beijing.", "He is late."]),
    ("Mr. Smith and Mrs. Zhang met Prof. Liu today.", ["Mr. Smith and Mrs. Zhang met Prof. Liu today."]),
    ("The U.S. economy grew. Exports rose.", ["The U.S. economy grew.", "Exports rose."]),
    ("Bring fruit, e.g. apples or pears. Do not be late.", ["Bring fruit, e.g. apples or pears.", "Do not be late."]),
    ("Use a pen, i.e. not a pencil. Thanks.", ["Use a pen, i.e. not a pencil.", "Thanks."]),
    ("We sell cups, plates, etc. Come and see.", ["We sell cups, plates, etc.", "Come and see."]),
    ("It costs $4.50. That is cheap.", ["It costs $4.50.", "That is cheap."]),
    ("Prices fell by 2.5% in 2023. Sales rose.", ["Prices fell by 2.5% in 2023.", "Sales rose."]),
    ("The total is 1,234.56 yuan. Pay now.", ["The total is 1,234.56 yuan.", "Pay now."]),
    ("The train leaves at 9:30 a.m. every day.", ["The train leaves at 9:30 a.m. every day."]),
    (
        "Visit https://example.com/a.b/c.html today. It is free.",
        ["Visit https://example.com/a.b/c.html today.", "It is free."],
    ),
    (
        "Write to info@example.co.uk for help. We answer fast.",
        ["Write to info@example.co.uk for help.", "We answer fast."],
    ),
    ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
    ('"Is it open?" she asked.', ['"Is it open?" she asked.']),
    ("The shop (open since 1990.) is closed. Sorry.", ["The shop (open since 1990.) is closed.", "Sorry."]),
    ("Wait... the price changed. Check again.", ["Wait... the price changed.", "Check again."]),
    ("Is the car new? Yes! It is.", ["Is the car new?", "Yes!", "It is."]),
    ("J. K. Rowling wrote seven books. They sold well.", ["J. K. Rowling wrote seven books.", "They sold well."]),
    ("Acme Inc. sold 300 phones. Profits rose.", ["Acme Inc. sold 300 phones.", "Profits rose."]),
    ("Room No. 5 is on the left. Go there.", ["Room No. 5 is on the left.", "Go there."]),
    ("He lives in St. Louis. She lives in Rome.", ["He lives in St. Louis.", "She lives in Rome."]),
    ("Shipping Information", ["Shipping Information"]),
    ("1. Open the box. 2. Take out the phone.", ["1. Open the box.", "2. Take out the phone."]),
    ("- Free delivery on all orders", ["- Free delivery on all orders"]),
    ("The meeting starts at 9 am. Please be on time.", ["The meeting starts at 9 am.", "Please be on time."]),
    ("It weighs 2.5 kg. It is heavy.", ["It weighs 2.5 kg.", "It is heavy."]),
    ("Version 2.0.1 is out. Update now.", ["Version 2.0.1 is out.", "Update now."]),
    ("Call me at 555-1234. Or e-mail me.", ["Call me at 555-1234.", "Or e-mail me."]),
    ("Good morning! How are you? I am fine.", ["Good morning!", "How are you?", "I am fine."]),
    ("The temperature is -5 degrees. Wear a coat.", ["The temperature is -5 degrees.", "Wear a coat."]),
    ("See Fig. 3 for details. It shows the trend.", ["See Fig. 3 for details.", "It shows the trend."]),
    ("Order now: only 3 left.", ["Order now: only 3 left."]),
    ("Sales rose in Jan. and Feb. of this year.", ["Sales rose in Jan. and Feb. of this year."]),
    ("He paid €20. She paid £15. They left.", ["He paid €20.", "She paid £15.", "They left."]),
    ("The U.K. and the U.S. signed it. Trade grew.", ["The U.K. and the U.S. signed it.", "Trade grew."]),
    ("Thank you very much", ["Thank you very much"]),
    ("Delivery is free.Payment is due today.", ["Delivery is free.", "Payment is due today."]),
    ("The price is 5 dollars (about 36 yuan). It is fair.", ["The price is 5 dollars (about 36 yuan).", "It is fair."]),
    ("Peter asked, 'Where is the bank?' Nobody knew.", ["Peter asked, 'Where is the bank?'", "Nobody knew."]),
]

# Grown in the directions pysbd stumbles on (issue: a held-out set scored F1 0.985): ranks and
# military and place abbreviations, URLs with ?/#/&, e-mail addresses, file names, version numbers,
# ellipses inside quotes, abbreviations that do or do not end a sentence. Written before the rules
# in ``worker.documents.segment`` that fix pysbd's misses, and scored separately from CASES.
GROWN: list[tuple[str, list[str]]] = [
    ("Gen. Smith visited Ft. Bragg on Monday. The troops cheered.",
     ["Gen. Smith visited Ft. Bragg on Monday.", "The troops cheered."]),
    ("Lt. Col. Jones arrived at 9 am. He met Maj. Lee.", ["Lt. Col. Jones arrived at 9 am.", "He met Maj. Lee."]),
    ("Capt. Brown and Sgt. White left Mt. Vernon. They drove north.",
     ["Capt. Brown and Sgt. White left Mt. Vernon.", "They drove north."]),
    ("Adm. Nimitz commanded the fleet. Cpl. Diaz stayed behind.",
     ["Adm. Nimitz commanded the fleet.", "Cpl. Diaz stayed behind."]),
    ("The store is on Main St. near the bank. It opens at 8.",
     ["The store is on Main St. near the bank.", "It opens at 8."]),
    ("Brig. Gen. Carter spoke to Pvt. Ortiz. Nobody else came.",
     ["Brig. Gen. Carter spoke to Pvt. Ortiz.", "Nobody else came."]),
    ("Sen. Warren and Rep. Ocasio met Gov. Hochul. They talked about trade.",
     ["Sen. Warren and Rep. Ocasio met Gov. Hochul.", "They talked about trade."]),
    ("Rev. King spoke in Washington, D.C. in 1963. Millions listened.",
     ["Rev. King spoke in Washington, D.C. in 1963.", "Millions listened."]),
    ("We flew from Ft. Lauderdale to St. Paul. It was cold.", ["We flew from Ft. Lauderdale to St. Paul.", "It was cold."]),
    ("Dr. Wu works at Mt. Sinai Hospital. She is a surgeon.", ["Dr. Wu works at Mt. Sinai Hospital.", "She is a surgeon."]),
    ("Prof. Adams lives on Elm Ave. in Boston. He teaches math.",
     ["Prof. Adams lives on Elm Ave. in Boston.", "He teaches math."]),
    ("Insp. Clouseau arrived. Det. Smith was late.", ["Insp. Clouseau arrived.", "Det. Smith was late."]),
    ("Open https://shop.example.com/search?q=apples&page=2 now. It lists prices.",
     ["Open https://shop.example.com/search?q=apples&page=2 now.", "It lists prices."]),
    ("See https://example.com/docs#install for details. It is short.",
     ["See https://example.com/docs#install for details.", "It is short."]),
    ("Go to www.example.org/faq?lang=en. Then click Help.", ["Go to www.example.org/faq?lang=en.", "Then click Help."]),
    ("Is the link http://a.example/x?y=1 still valid? I am not sure.",
     ["Is the link http://a.example/x?y=1 still valid?", "I am not sure."]),
    ("Download it from https://example.com/files/report.pdf?v=3#page=2 today. It is free.",
     ["Download it from https://example.com/files/report.pdf?v=3#page=2 today.", "It is free."]),
    ("The API is at https://api.example.com/v1/items?id=7&sort=asc. Call it.",
     ["The API is at https://api.example.com/v1/items?id=7&sort=asc.", "Call it."]),
    ("Write to sales.team@example.com today. We reply fast.", ["Write to sales.team@example.com today.", "We reply fast."]),
    ("Contact j.doe@mail.example.org or a.b@c.io. Both work.", ["Contact j.doe@mail.example.org or a.b@c.io.", "Both work."]),
    ("Open the file report.final.docx and read it. Then send it back.",
     ["Open the file report.final.docx and read it.", "Then send it back."]),
    ("Run setup.py install first. Then restart.", ["Run setup.py install first.", "Then restart."]),
    ("The logo is in img/logo.png. Use it.", ["The logo is in img/logo.png.", "Use it."]),
    ("Edit config.yaml and main.js. Save both.", ["Edit config.yaml and main.js.", "Save both."]),
    ("Python 3.11.7 is installed. Update to 3.12 later.", ["Python 3.11.7 is installed.", "Update to 3.12 later."]),
    ("We moved from v2.4.1 to v3.0. Nothing broke.", ["We moved from v2.4.1 to v3.0.", "Nothing broke."]),
    ("Release 1.0.0-rc.1 is out. Test it.", ["Release 1.0.0-rc.1 is out.", "Test it."]),
    ("Chrome ver. 120 works. Firefox does too.", ["Chrome ver. 120 works.", "Firefox does too."]),
    ('She said "Well... maybe." Then she left.', ['She said "Well... maybe."', "Then she left."]),
    ('"I don\'t know..." he whispered. The room was quiet.', ['"I don\'t know..." he whispered.', "The room was quiet."]),
    ("He paused... and then smiled. We laughed.", ["He paused... and then smiled.", "We laughed."]),
    ("'Wait...' she said. 'Look there.'", ["'Wait...' she said.", "'Look there.'"]),
    ('The sign read "Closed... for now". We went home.', ['The sign read "Closed... for now".', "We went home."]),
    ("The meeting is at 3 p.m. on Friday. Please come.", ["The meeting is at 3 p.m. on Friday.", "Please come."]),
    ("Mr. and Mrs. Smith arrived at 10 a.m. They were early.",
     ["Mr. and Mrs. Smith arrived at 10 a.m.", "They were early."]),
    ("Our office is in the U.S. We also have one in Canada.", ["Our office is in the U.S.", "We also have one in Canada."]),
    ("Pages 10-12 (see Sec. 4.2) explain it. Read them.", ["Pages 10-12 (see Sec. 4.2) explain it.", "Read them."]),
    ("The package weighs approx. 3 kg. It ships today.", ["The package weighs approx. 3 kg.", "It ships today."]),
    ("Call +1 (555) 123-4567 ext. 89 now. Ask for Anna.", ["Call +1 (555) 123-4567 ext. 89 now.", "Ask for Anna."]),
    ("It happened in Jan. 2024. Nobody noticed.", ["It happened in Jan. 2024.", "Nobody noticed."]),
    ("Apples, pears, etc. are on sale. Come early.", ["Apples, pears, etc. are on sale.", "Come early."]),
    ("He scored 9.5/10. That is great.", ["He scored 9.5/10.", "That is great."]),
    ("Ms. Tanaka joined Acme Corp. in 2019. She leads sales.", ["Ms. Tanaka joined Acme Corp. in 2019.", "She leads sales."]),
    ("Read chapter 3, i.e., the one about trade. It is long.", ["Read chapter 3, i.e., the one about trade.", "It is long."]),
    ("The flight AA123 leaves at 14:05. Boarding starts at 13:35.",
     ["The flight AA123 leaves at 14:05.", "Boarding starts at 13:35."]),
    ("Is it 5 p.m. yet? No, it's 4.", ["Is it 5 p.m. yet?", "No, it's 4."]),
    ("The vote was 5-4. The bill passed.", ["The vote was 5-4.", "The bill passed."]),
    ("He holds a Ph.D. in physics. She has an M.B.A. from Yale.",
     ["He holds a Ph.D. in physics.", "She has an M.B.A. from Yale."]),
    ("The temperature hit 40°C. Stay inside.", ["The temperature hit 40°C.", "Stay inside."]),
    ("Who won? Nobody knows! Let's see.", ["Who won?", "Nobody knows!", "Let's see."]),
    ("The price is ¥1,200 (approx. $8). It is fair.", ["The price is ¥1,200 (approx. $8).", "It is fair."]),
    ("Col. Sanders opened a shop in Ky. in 1930. It sold chicken.",
     ["Col. Sanders opened a shop in Ky. in 1930.", "It sold chicken."]),
    ("Our HQ moved to Mt. Pleasant, S.C. last year. Rent is lower.",
     ["Our HQ moved to Mt. Pleasant, S.C. last year.", "Rent is lower."]),
    ("See the FAQ at https://example.com/help/#faq-3 or e-mail help@example.com. We answer within a day.",
     ["See the FAQ at https://example.com/help/#faq-3 or e-mail help@example.com.", "We answer within a day."]),
    ("Gen. Patton led the 3rd Army. Lt. Gen. Bradley led another.",
     ["Gen. Patton led the 3rd Army.", "Lt. Gen. Bradley led another."]),
    ("Nov. 5 is a holiday. Offices close.", ["Nov. 5 is a holiday.", "Offices close."]),
    ("Sgt. Maj. Ruiz trained them at Ft. Benning. Then they shipped out.",
     ["Sgt. Maj. Ruiz trained them at Ft. Benning.", "Then they shipped out."]),
    ("Maj. Gen. Ito flew to Mt. Fuji. The view was clear.", ["Maj. Gen. Ito flew to Mt. Fuji.", "The view was clear."]),
    ("Check https://example.com/a?b=c&d=e#f. Then reload.", ["Check https://example.com/a?b=c&d=e#f.", "Then reload."]),
    ('He wrote "See you soon..." and left. It was late.', ['He wrote "See you soon..." and left.', "It was late."]),
]  # fmt: skip

# Written blind, for the held-out score: by a second author who never saw the segmenter, in the same
# directions plus paths, ports, lowercase chat and missing spaces. Before the rules for paths, commas and
# "!!!" were added, ours scored boundary F1 0.976 on it (pysbd 0.926, sentencex 0.972); two lines stay
# missed ("Well... I guess", "the U.S. Some"), both ones the author called borderline or ambiguous.
HELD_OUT: list[tuple[str, list[str]]] = [
    (
        "Gen. Mark Hollis arrived at Ft. Bragg on Tuesday. He met with Lt. Col. Dana Ruiz before the briefing. The briefing lasted two hours.",
        [
            "Gen. Mark Hollis arrived at Ft. Bragg on Tuesday.",
            "He met with Lt. Col. Dana Ruiz before the briefing.",
            "The briefing lasted two hours.",
        ],
    ),
    (
        "The parade will start on Main St. and end near the river. Sgt. Maj. Tom Kelly will lead the color guard. Bring water and sunscreen.",
        [
            "The parade will start on Main St. and end near the river.",
            "Sgt. Maj. Tom Kelly will lead the color guard.",
            "Bring water and sunscreen.",
        ],
    ),
    (
        "Adm. Grace Whitfield told reporters the fleet was ready. Capt. Ian Moss disagreed.",
        ["Adm. Grace Whitfield told reporters the fleet was ready.", "Capt. Ian Moss disagreed."],
    ),
    (
        "Rev. Alan Brooks will officiate. Gov. Patricia Lane and Sen. Omar Haddad are expected to attend. Rep. Julia Chen sent her regrets.",
        [
            "Rev. Alan Brooks will officiate.",
            "Gov. Patricia Lane and Sen. Omar Haddad are expected to attend.",
            "Rep. Julia Chen sent her regrets.",
        ],
    ),
    (
        "Insp. Ravi Patel of the harbour police confirmed the arrest. Supt. Helen Carter declined to comment.",
        ["Insp. Ravi Patel of the harbour police confirmed the arrest.", "Supt. Helen Carter declined to comment."],
    ),
    (
        "Please send the package to 42 Elm St. in Springfield by Friday. Our office closes at noon.",
        ["Please send the package to 42 Elm St. in Springfield by Friday.", "Our office closes at noon."],
    ),
    (
        "Lt. Gen. Ray Dalton, commander of the 3rd Infantry Division, retired in Oct. after 34 years. His successor has not been named.",
        [
            "Lt. Gen. Ray Dalton, commander of the 3rd Infantry Division, retired in Oct. after 34 years.",
            "His successor has not been named.",
        ],
    ),
    (
        "Dr. Alice Wong and Prof. Ben Adler co-authored the study. It was published in Nature on Sept. 9.",
        ["Dr. Alice Wong and Prof. Ben Adler co-authored the study.", "It was published in Nature on Sept. 9."],
    ),
    (
        "Our new address is 1200 Market St., Suite 400, San Francisco. Please update your records.",
        ["Our new address is 1200 Market St., Suite 400, San Francisco.", "Please update your records."],
    ),
    (
        "Sen. Maria Ortiz (D-Calif.) introduced the bill on Thursday. It has 12 co-sponsors.",
        ["Sen. Maria Ortiz (D-Calif.) introduced the bill on Thursday.", "It has 12 co-sponsors."],
    ),
    (
        "Capt. Jenkins ordered the crew to St. John's harbor. The storm hit at 2 a.m. Nobody was hurt.",
        ["Capt. Jenkins ordered the crew to St. John's harbor.", "The storm hit at 2 a.m.", "Nobody was hurt."],
    ),
    (
        "Wait, what? You're moving to Ft. Worth? Since when?",
        ["Wait, what?", "You're moving to Ft. Worth?", "Since when?"],
    ),
    (
        "Supt. Greene said the road near Mt. Pleasant would reopen by 5 p.m. on Sunday. Drivers should expect delays. Use Route 9 as an alternative.",
        [
            "Supt. Greene said the road near Mt. Pleasant would reopen by 5 p.m. on Sunday.",
            "Drivers should expect delays.",
            "Use Route 9 as an alternative.",
        ],
    ),
    (
        "Lt. Col. (Ret.) Sam Ortiz will speak at 7 p.m. tonight. Seating is limited. Doors open at 6:30.",
        ["Lt. Col. (Ret.) Sam Ortiz will speak at 7 p.m. tonight.", "Seating is limited.", "Doors open at 6:30."],
    ),
    (
        "The memorial service for Sgt. Maj. Ellen Price will be held at St. Mark's Church. Adm. Victor Hale will deliver the eulogy.",
        [
            "The memorial service for Sgt. Maj. Ellen Price will be held at St. Mark's Church.",
            "Adm. Victor Hale will deliver the eulogy.",
        ],
    ),
    (
        "See https://example.com/search?q=sentence+split&lang=en#results for the full list. Let me know if the link breaks. The page loads slowly on mobile.",
        [
            "See https://example.com/search?q=sentence+split&lang=en#results for the full list.",
            "Let me know if the link breaks.",
            "The page loads slowly on mobile.",
        ],
    ),
    (
        "The dashboard runs at http://localhost:8080/admin/stats?range=7d. Restart the service if it hangs.",
        ["The dashboard runs at http://localhost:8080/admin/stats?range=7d.", "Restart the service if it hangs."],
    ),
    (
        "Visit www.acme-tools.co.uk for spare parts. Orders ship within 2 business days.",
        ["Visit www.acme-tools.co.uk for spare parts.", "Orders ship within 2 business days."],
    ),
    (
        "Email support@widgetco.com or call 555-0142. We reply within 24 hours.",
        ["Email support@widgetco.com or call 555-0142.", "We reply within 24 hours."],
    ),
    (
        "Did you check https://docs.example.org/v2/install.html#linux? It covers the proxy settings.",
        ["Did you check https://docs.example.org/v2/install.html#linux?", "It covers the proxy settings."],
    ),
    (
        "Contact jane.doe@mail.example.net for the Q3 figures. She's out until Monday, though.",
        ["Contact jane.doe@mail.example.net for the Q3 figures.", "She's out until Monday, though."],
    ),
    (
        "The full report (https://stats.example.gov/reports/2023/q4.pdf) is available online. Download it before the link expires.",
        [
            "The full report (https://stats.example.gov/reports/2023/q4.pdf) is available online.",
            "Download it before the link expires.",
        ],
    ),
    (
        "Our API lives at https://api.example.io:8443/v1/users?id=42&fields=name,email. Requests need an auth token. Rate limits apply.",
        [
            "Our API lives at https://api.example.io:8443/v1/users?id=42&fields=name,email.",
            "Requests need an auth token.",
            "Rate limits apply.",
        ],
    ),
    (
        "Check www.example.com/faq! Most questions are answered there.",
        ["Check www.example.com/faq!", "Most questions are answered there."],
    ),
    (
        "Forward the logs to ops-team@corp.example.com. Include the timestamps. Do not attach binaries.",
        ["Forward the logs to ops-team@corp.example.com.", "Include the timestamps.", "Do not attach binaries."],
    ),
    (
        "The coupon only works through http://shop.example.com/cart?promo=SPRING24&ref=email. It expires on Sunday.",
        [
            "The coupon only works through http://shop.example.com/cart?promo=SPRING24&ref=email.",
            "It expires on Sunday.",
        ],
    ),
    (
        "I attached report.final.pdf and budget.v2.xlsx. Please review them before the call. The numbers in tab 3 are still draft.",
        [
            "I attached report.final.pdf and budget.v2.xlsx.",
            "Please review them before the call.",
            "The numbers in tab 3 are still draft.",
        ],
    ),
    (
        "Run python setup.py install in the project root. Then restart the shell.",
        ["Run python setup.py install in the project root.", "Then restart the shell."],
    ),
    (
        "The log is written to C:\\temp\\a.txt by default. You can change the path in settings.ini.",
        ["The log is written to C:\\temp\\a.txt by default.", "You can change the path in settings.ini."],
    ),
    (
        "Edit /etc/hosts and add the new IP. Save the file. Then flush the DNS cache with sudo systemd-resolve --flush-caches.",
        [
            "Edit /etc/hosts and add the new IP.",
            "Save the file.",
            "Then flush the DNS cache with sudo systemd-resolve --flush-caches.",
        ],
    ),
    (
        "Version 3.11.7 fixes the memory leak reported in 3.11.6. Upgrade as soon as possible. No configuration changes are needed.",
        [
            "Version 3.11.7 fixes the memory leak reported in 3.11.6.",
            "Upgrade as soon as possible.",
            "No configuration changes are needed.",
        ],
    ),
    (
        "We tagged v1.2.3 yesterday and 1.0.0-rc.1 of the new client today. Both are on the release page.",
        ["We tagged v1.2.3 yesterday and 1.0.0-rc.1 of the new client today.", "Both are on the release page."],
    ),
    (
        "Open config/settings.yaml, set debug to true, and run ./start.sh again. If it still fails, send me the output of npm -v.",
        [
            "Open config/settings.yaml, set debug to true, and run ./start.sh again.",
            "If it still fails, send me the output of npm -v.",
        ],
    ),
    (
        "The patch upgrades OpenSSL from 1.1.1w to 3.0.13. See CHANGELOG.md for details.",
        ["The patch upgrades OpenSSL from 1.1.1w to 3.0.13.", "See CHANGELOG.md for details."],
    ),
    (
        "Firmware 2.4.0-beta.3 bricked two of our test units. Roll back to 2.3.9 until a fix ships.",
        ["Firmware 2.4.0-beta.3 bricked two of our test units.", "Roll back to 2.3.9 until a fix ships."],
    ),
    (
        "I waited... and waited... and nobody came. So I went home.",
        ["I waited... and waited... and nobody came.", "So I went home."],
    ),
    (
        'She said, "I\'m not sure..." Then she left the room.',
        ['She said, "I\'m not sure..."', "Then she left the room."],
    ),
    (
        "Well... I guess we could try again tomorrow. What time works for you?",
        ["Well... I guess we could try again tomorrow.", "What time works for you?"],
    ),
    ('He asked, "Are you coming?" I said no.', ['He asked, "Are you coming?"', "I said no."]),
    ('"Stop right there!" the guard shouted. We froze.', ['"Stop right there!" the guard shouted.', "We froze."]),
    (
        "The committee approved the plan. (The vote was 7 to 2.) Work begins in March.",
        ["The committee approved the plan.", "(The vote was 7 to 2.)", "Work begins in March."],
    ),
    (
        "Is this the final version? Really? I thought we still had edits!",
        ["Is this the final version?", "Really?", "I thought we still had edits!"],
    ),
    (
        "Wow!!! That was the best concert ever. Thanks for the tickets!",
        ["Wow!!!", "That was the best concert ever.", "Thanks for the tickets!"],
    ),
    (
        'The sign read "Closed for repairs." We drove to the next town.',
        ['The sign read "Closed for repairs."', "We drove to the next town."],
    ),
    (
        '"Where\'s the key?" she asked. "I left it on the table." He pointed at the counter.',
        ['"Where\'s the key?" she asked.', '"I left it on the table."', "He pointed at the counter."],
    ),
    (
        "He finally answered: 'I don't know.' Then he hung up.",
        ["He finally answered: 'I don't know.'", "Then he hung up."],
    ),
    (
        "I paid $3.99 for the app... and it crashed immediately. Don't buy it.",
        ["I paid $3.99 for the app... and it crashed immediately.", "Don't buy it."],
    ),
    (
        'The witness said the car was "going really fast..." but could not estimate the speed. Police are reviewing camera footage.',
        [
            'The witness said the car was "going really fast..." but could not estimate the speed.',
            "Police are reviewing camera footage.",
        ],
    ),
    (
        'Our CEO called the results "disappointing." Shares fell 6% in early trading.',
        ['Our CEO called the results "disappointing."', "Shares fell 6% in early trading."],
    ),
    (
        "Bring snacks, drinks, chairs, etc. to the picnic. We'll provide the grill.",
        ["Bring snacks, drinks, chairs, etc. to the picnic.", "We'll provide the grill."],
    ),
    (
        "We need paper, pens, staplers, etc. The order goes out Friday.",
        ["We need paper, pens, staplers, etc.", "The order goes out Friday."],
    ),
    (
        "The meeting starts at 9 a.m. sharp. Lunch is at 12:30 p.m. in the atrium.",
        ["The meeting starts at 9 a.m. sharp.", "Lunch is at 12:30 p.m. in the atrium."],
    ),
    ("The store closes at 6 p.m. Please plan accordingly.", ["The store closes at 6 p.m.", "Please plan accordingly."]),
    (
        "He moved to the U.S. in 1998. He later became a citizen.",
        ["He moved to the U.S. in 1998.", "He later became a citizen."],
    ),
    (
        "Most of our suppliers are based in the U.S. Some are in Canada and Mexico.",
        ["Most of our suppliers are based in the U.S.", "Some are in Canada and Mexico."],
    ),
    (
        "The contract was signed by Brightline Inc. and Harbor Ltd. last week. Terms were not disclosed. Both firms declined to comment.",
        [
            "The contract was signed by Brightline Inc. and Harbor Ltd. last week.",
            "Terms were not disclosed.",
            "Both firms declined to comment.",
        ],
    ),
    (
        "The shares were bought by Northgate Holdings Ltd. The deal closed on March 3.",
        ["The shares were bought by Northgate Holdings Ltd.", "The deal closed on March 3."],
    ),
    (
        "The lead role went to Harold Simmons Jr. His father had played the same part in 1979.",
        ["The lead role went to Harold Simmons Jr.", "His father had played the same part in 1979."],
    ),
    (
        "The invoice is dated Jan. 15 and is due Feb. 14. Late fees apply after that.",
        ["The invoice is dated Jan. 15 and is due Feb. 14.", "Late fees apply after that."],
    ),
    (
        "Refer to Fig. 3 and Sec. 4.2 of the manual. Item No. 17 is the replacement valve.",
        ["Refer to Fig. 3 and Sec. 4.2 of the manual.", "Item No. 17 is the replacement valve."],
    ),
    (
        "The trip takes approx. 45 minutes by train. Tickets cost $12.50 each. Seniors pay half.",
        ["The trip takes approx. 45 minutes by train.", "Tickets cost $12.50 each.", "Seniors pay half."],
    ),
    ("It was Smith vs. Jones all over again. Nobody won.", ["It was Smith vs. Jones all over again.", "Nobody won."]),
    (
        "Use a mild cleaner, e.g. diluted vinegar, on the glass. Avoid ammonia-based sprays.",
        ["Use a mild cleaner, e.g. diluted vinegar, on the glass.", "Avoid ammonia-based sprays."],
    ),
    (
        "Store the unit in a dry place, i.e. not in the basement. Humidity damages the sensors.",
        ["Store the unit in a dry place, i.e. not in the basement.", "Humidity damages the sensors."],
    ),
    (
        "Results are shown in Fig. 2b. The error bars represent one standard deviation.",
        ["Results are shown in Fig. 2b.", "The error bars represent one standard deviation."],
    ),
    (
        "Table 2 shows results for the U.K. and U.S. markets. Growth in the U.K. was flat. The U.S. grew 3.1%.",
        ["Table 2 shows results for the U.K. and U.S. markets.", "Growth in the U.K. was flat.", "The U.S. grew 3.1%."],
    ),
    (
        "The ticket costs €25 (approx. $27). Children under 12 enter free.",
        ["The ticket costs €25 (approx. $27).", "Children under 12 enter free."],
    ),
    (
        "Revenue rose 4.7% to $1.25 billion in the quarter. Operating margin was 18.3%. Analysts had expected 17.9%.",
        [
            "Revenue rose 4.7% to $1.25 billion in the quarter.",
            "Operating margin was 18.3%.",
            "Analysts had expected 17.9%.",
        ],
    ),
    (
        "The race is on the 21st. Registration closes on the 14th. Late entries cost £5.",
        ["The race is on the 21st.", "Registration closes on the 14th.", "Late entries cost £5."],
    ),
    (
        "Her flight lands at 11:45 p.m. on the 3rd. Can you pick her up?",
        ["Her flight lands at 11:45 p.m. on the 3rd.", "Can you pick her up?"],
    ),
    (
        "Press and hold the power button for 5 sec. until the LED blinks. Release the button. The device will reboot automatically.",
        [
            "Press and hold the power button for 5 sec. until the LED blinks.",
            "Release the button.",
            "The device will reboot automatically.",
        ],
    ),
    (
        "Dimensions: 12.5 x 8.0 x 3.2 in. Weight: 2.4 lbs. Includes a 2-year warranty.",
        ["Dimensions: 12.5 x 8.0 x 3.2 in.", "Weight: 2.4 lbs.", "Includes a 2-year warranty."],
    ),
    (
        "Hi Tom, just following up on the invoice from Dec. 2. Could you confirm receipt? Thanks in advance!",
        ["Hi Tom, just following up on the invoice from Dec. 2.", "Could you confirm receipt?", "Thanks in advance!"],
    ),
    (
        "lol that's hilarious!! did you see the new trailer? it drops friday",
        ["lol that's hilarious!!", "did you see the new trailer?", "it drops friday"],
    ),
    ("ok sounds good. see you at 5", ["ok sounds good.", "see you at 5"]),
    ("thanks for the update, will check tomorrow", ["thanks for the update, will check tomorrow"]),
    ("Free shipping on orders over $50", ["Free shipping on orders over $50"]),
    ("Shipping is free.Payment is due on delivery.", ["Shipping is free.", "Payment is due on delivery."]),
    (
        "The battery lasts all day.It charges in under an hour. Highly recommended!",
        ["The battery lasts all day.", "It charges in under an hour.", "Highly recommended!"],
    ),
    (
        "Thanks for your order.Your tracking number will arrive by email.",
        ["Thanks for your order.", "Your tracking number will arrive by email."],
    ),
]
